import AppdAPI
import AppdClient
import Foundation
import Testing

/// `Library/Caches` is reclaimable (issue 27 §5): below `[Storage] ReclaimCachesBelow` appd
/// empties the Caches of apps not running, least recently launched first, until the state
/// root's filesystem is above the level; `appd reclaim-caches` does it by hand. On a small
/// loop filesystem filled up, with real sandboxed apps that wrote their Caches (and planted
/// links there).
@Suite("Library/Caches reclaimed when space runs short", .serialized, rootOnly)
struct CacheReclaimTests {
    static func entries(_ path: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }

    static func available(_ path: String) -> Int64 {
        var st = statvfs()
        guard statvfs(path, &st) == 0 else { return -1 }
        return Int64(st.f_bavail) * Int64(st.f_frsize)
    }

    static let caches8M = ["home", "file", "Library/Caches/c", "8388608"]

    @Test(
        "below the level, the least recently launched app's Caches go first and the reclaiming stops above it; a running app's Caches and the targets of links planted there are untouched"
    )
    func leastRecentlyLaunchedFirst() throws {
        let fs = try LoopFilesystem(sizeMiB: 128, quota: false)
        let daemon = try TestDaemon(
            config: "[Storage]\nReclaimCachesBelow=40M\n", root: "\(fs.mountPoint)/root")
        defer {
            withExtendedLifetime(daemon) {}
            withExtendedLifetime(fs) {}
        }
        let secret = "\(daemon.directory)/secret"
        try Data("host secret".utf8).write(to: URL(fileURLWithPath: secret))
        let victim = "\(daemon.directory)/victim"
        try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: true)
        try Data("host file".utf8).write(to: URL(fileURLWithPath: "\(victim)/file"))
        for id in ["com.example.running", "com.example.older", "com.example.newer"] {
            try daemon.installProbe(id)
        }
        // Launched first (so least recently), and still running when space runs short.
        let running = try daemon.launch("com.example.running", Self.caches8M + ["sleep", "120"])
        #expect(
            daemon.eventually {
                (try? daemon.logs(running.id))?.contains("Library/Caches/c allowed") == true
            })
        let older = try daemon.launch(
            "com.example.older",
            Self.caches8M + [
                "link", secret, "Library/Caches/leak", "link", victim, "Library/Caches/dir",
            ])
        #expect(try daemon.wait(older.id).exit?.code == 0)
        usleep(20_000)
        let newer = try daemon.launch("com.example.newer", Self.caches8M)
        #expect(try daemon.wait(newer.id).exit?.code == 0)
        let caches = try ["com.example.running", "com.example.older", "com.example.newer"].map {
            "\(try daemon.dataContainer($0))/Library/Caches"
        }
        #expect(caches.map(Self.entries) == [["c"], ["c", "dir", "leak"], ["c"]])

        // Fill the filesystem to 4 MiB under the level: the older app's 8 MiB bring it above.
        let level: Int64 = 40 << 20
        let filler = "\(fs.mountPoint)/filler"
        let fill = Self.available(fs.mountPoint) - (level - (4 << 20))
        #expect(fill > 0)
        let fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        #expect(fd >= 0 && posix_fallocate(fd, 0, off_t(fill)) == 0)
        close(fd)
        #expect(Self.available(fs.mountPoint) < level)

        // An install checks the level afterwards.
        try daemon.installProbe("com.example.trigger")
        #expect(daemon.eventually { Self.entries(caches[1]).isEmpty })
        usleep(500_000)  // anything more it would do, it does now
        #expect(Self.available(fs.mountPoint) >= level)
        #expect(Self.entries(caches[0]) == ["c"], "the running app's Caches were touched")
        #expect(Self.entries(caches[2]) == ["c"], "reclaiming went on past the level")
        #expect(try String(contentsOfFile: secret, encoding: .utf8) == "host secret")
        #expect(Self.entries(victim) == ["file"])

        var events = ""
        try? daemon.client.stream("/v1/events?since=0") { bytes in
            events += String(decoding: bytes, as: UTF8.self)
            if events.contains("Library/Caches emptied") { throw CancellationError() }
        }
        #expect(events.contains("\"com.example.older\""), "\(events)")
        #expect(events.contains("ReclaimCachesBelow=41943040"), "\(events)")
        let metrics = try daemon.client.send("GET", "/v1/metrics")
        let text = String(decoding: metrics.body, as: UTF8.self)
        #expect(text.contains("appd_cache_reclaims_total{app=\"com.example.older\"} 1"), "\(text)")
        #expect(text.contains("appd_cache_reclaimed_bytes_total{app=\"com.example.older\"} 8"))
        #expect(!text.contains("appd_cache_reclaims_total{app=\"com.example.newer\"}"))
        try daemon.killAndWait(running.id)
    }

    @Test(
        "appd reclaim-caches ID empties that app's Caches and prints what it freed; refused while the app runs; without an id and a level, every app not running"
    )
    func byHand() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.hand")
        try daemon.installProbe("com.example.other")
        let run = try daemon.launch(
            "com.example.hand", ["home", "file", "Library/Caches/c", "1048576", "sleep", "120"])
        #expect(
            daemon.eventually {
                (try? daemon.logs(run.id))?.contains("Library/Caches/c allowed") == true
            })
        let caches = "\(try daemon.dataContainer("com.example.hand"))/Library/Caches"
        let refused = try daemon.run("appd", ["reclaim-caches", "com.example.hand"])
        #expect(refused.code == 1 && refused.output.contains("running"), "\(refused.output)")
        #expect(Self.entries(caches) == ["c"])
        let all = try daemon.run("appd", ["reclaim-caches"])
        #expect(all.code == 0, "\(all.output)")
        #expect(all.output.contains("com.example.hand: running"), "\(all.output)")
        #expect(Self.entries(caches) == ["c"])
        try daemon.killAndWait(run.id)

        let freed = try daemon.run("appd", ["reclaim-caches", "com.example.hand"])
        #expect(freed.code == 0, "\(freed.output)")
        #expect(freed.output.contains("com.example.hand: 1 MB freed"), "\(freed.output)")
        #expect(Self.entries(caches) == [])
        // The folder stays, the app's, and the app writes there again.
        let again = try daemon.launch(
            "com.example.hand", ["home", "file", "Library/Caches/d", "10"])
        #expect(try daemon.wait(again.id).exit?.code == 0)
        #expect(Self.entries(caches) == ["d"])

        let other = try daemon.launch(
            "com.example.other", ["home", "file", "Library/Caches/o", "4096"])
        #expect(try daemon.wait(other.id).exit?.code == 0)
        let json = try daemon.run("appd", ["reclaim-caches", "--json"])
        let answer = try APICachesReclaim.decoded(json.output)
        #expect(Set(answer.reclaimed.map(\.app)) == ["com.example.hand", "com.example.other"])
        #expect(answer.level == nil)
    }
}

extension APICachesReclaim {
    static func decoded(_ text: String) throws -> APICachesReclaim {
        try APICoding.decoder().decode(APICachesReclaim.self, from: Data(text.utf8))
    }
}
