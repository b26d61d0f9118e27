import AppdAPI
import AppdClient
import Foundation
import Testing

/// `appd info` / `appctl info` show an app's storage as iOS's storage screen does (issue 27 §7),
/// measured by the daemon in files a real sandboxed app wrote.
@Suite("an app's storage in appd info", .serialized, rootOnly)
struct StorageSizeTests {
    static func storage(_ daemon: TestDaemon, _ id: String) throws -> APIStorage {
        try #require(try daemon.client.get("/v1/apps/\(id)", as: APIApp.self).storage)
    }

    @Test("the sizes follow what the app wrote in Documents, Library/Caches and tmp")
    func knownSizes() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.sizes")
        let before = try Self.storage(daemon, "com.example.sizes")
        // The app runs while it is measured: its tmp is emptied when it exits.
        let run = try daemon.launch(
            "com.example.sizes",
            [
                "home", "file", "Documents/doc", "1048576", "file", "Library/Caches/cache",
                "262144", "file", "tmp/scratch", "65536", "sleep", "60",
            ])
        #expect(
            daemon.eventually {
                (try? daemon.logs(run.id))?.contains("tmp/scratch allowed") == true
            })
        let after = try Self.storage(daemon, "com.example.sizes")
        #expect(after.complete)
        let slack: Int64 = 16 << 10  // a block or a few of metadata
        let documents = after.documentsAndDataBytes - before.documentsAndDataBytes
        #expect(documents >= 1 << 20 && documents <= (1 << 20) + slack, "\(before) \(after)")
        let caches = after.cachesBytes - before.cachesBytes
        #expect(caches >= 256 << 10 && caches <= (256 << 10) + slack, "\(after)")
        let tmp = after.tmpBytes - before.tmpBytes
        #expect(tmp >= 64 << 10 && tmp <= (64 << 10) + slack, "\(after)")
        var probe = stat()
        #expect(stat(builtExecutable("Probe"), &probe) == 0)
        #expect(after.appBytes >= Int64(probe.st_size) / 2 && after.appBytes == before.appBytes)
        let text = try daemon.run("appd", ["info", "com.example.sizes"])
        #expect(text.code == 0)
        #expect(text.output.contains("Documents & Data 1."), "\(text.output)")
        let json = try daemon.run("appd", ["info", "--json", "com.example.sizes"])
        #expect(json.output.contains("\"documentsAndDataBytes\""), "\(json.output)")
        try daemon.killAndWait(run.id)
        #expect(try Self.storage(daemon, "com.example.sizes").tmpBytes == before.tmpBytes)
    }

    @Test("links the app planted to a huge host file and to / are not counted")
    func linkToHugeFileNotCounted() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.sizelink")
        let huge = "\(daemon.directory)/huge"
        try Data(repeating: 0x78, count: 64 << 20).write(to: URL(fileURLWithPath: huge))
        let run = try daemon.launch(
            "com.example.sizelink",
            [
                "home", "link", huge, "Documents/huge", "link", huge, "Library/Caches/huge",
                "link", "/", "Documents/root", "link", "/", "tmp/root", "sleep", "60",
            ])
        #expect(
            daemon.eventually { (try? daemon.logs(run.id))?.contains("tmp/root allowed") == true })
        let storage = try Self.storage(daemon, "com.example.sizelink")
        #expect(storage.complete)
        #expect(storage.documentsAndDataBytes < 1 << 20, "\(storage)")
        #expect(storage.cachesBytes < 64 << 10 && storage.tmpBytes < 64 << 10, "\(storage)")
        try daemon.killAndWait(run.id)
    }
}
