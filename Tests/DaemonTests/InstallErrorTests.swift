import AppdAPI
import AppdBase
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
        #expect(
            result.output.hasPrefix("appd: \(bundle): not a valid app bundle"), "\(result.output)")
        // On the wire the bundle is a subject with no path of the daemon's, none in the message:
        // the client above put the one given in front; nothing rewrote a text.
        let json = try daemon.run("appd", ["install", "--json", bundle])
        #expect(json.code == 1)
        let body = try JSONDecoder().decode(APIErrorBody.self, from: Data(json.output.utf8))
        #expect(body.error.subject == .init(.bundle), "\(json.output)")
        #expect(body.error.message == "not a valid app bundle (1 problem)", "\(json.output)")
        #expect(!body.error.problems.isEmpty, "\(json.output)")
        #expect(!json.output.contains("incoming"), "\(json.output)")
    }
}

@Suite("shell completion names installed apps", .serialized, rootOnly)
struct CompletionTests {
    @Test("appd uninstall|info|profile|run and appctl launch complete bundle ids from the daemon")
    func bundleIDs() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.completed")
        // What the bash script ArgumentParser generates runs for `appd uninstall com.ex<TAB>`.
        for (tool, command) in [
            ("appd", "uninstall"), ("appd", "info"), ("appd", "profile"), ("appd", "run"),
            ("appctl", "launch"),
        ] {
            let words = [tool, command, "com.ex"]
            let result = try TestDaemon.run(
                tool, ["---completion", command, "--", "positional@0", "2", "6"] + words,
                environment: [
                    "APPD_ROOT": daemon.root, "SAP_SHELL": "bash", "PATH": "/usr/bin:/bin",
                ])
            #expect(result.code == 0, "\(tool) \(command): \(result.output)")
            #expect(
                result.output.split(separator: "\n").contains("com.example.completed"),
                "\(tool) \(command): \(result.output)")
        }
    }
}
