import Foundation
import Testing

@Suite("install errors through the daemon", .serialized, rootOnly)
struct InstallErrorTests {
    @Test(
        "a bundle the daemon refuses is named by the path the user gave, not the daemon's incoming folder"
    )
    func refusedBundleNamesUserPath() throws {
        let daemon = try TestDaemon()
        let bundle = try daemon.makeProbe("com.example.broken")
        try FileManager.default.removeItem(atPath: "\(bundle)/Probe")
        let result = try daemon.run("appd", ["install", bundle])
        #expect(result.code == 1)
        #expect(!result.output.contains("incoming"), "\(result.output)")
        #expect(result.output.contains(bundle), "\(result.output)")
    }
}
