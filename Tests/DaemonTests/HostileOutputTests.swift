import AppdAPI
import AppdClient
import Foundation
import Testing

/// Attacks through an app's own output (issue 13 §2), each from a real sandboxed Probe against
/// a real daemon: the app's stdout and stderr are a pipe read by the launcher's output relay
/// (docs/app-output.md), so nothing it does to them reaches the daemon, and the log keeps its
/// bound and every line.
@Suite("hostile app output", .serialized, rootOnly)
struct HostileOutputTests {
    static let logMax = 65536

    /// GET /v1/version and `appctl ps` each answer within a second.
    static func expectResponsive(
        _ daemon: TestDaemon, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let start = Date()
        _ = try AppdClient(socketPath: daemon.socket, timeout: 1).get(
            "/v1/version", as: APIDaemonInfo.self)
        #expect(
            Date().timeIntervalSince(start) < 1, "GET /v1/version", sourceLocation: sourceLocation)
        let psStart = Date()
        let ps = try daemon.run("appctl", ["ps"])
        #expect(ps.code == 0, "\(ps.output)", sourceLocation: sourceLocation)
        #expect(Date().timeIntervalSince(psStart) < 1, "appctl ps", sourceLocation: sourceLocation)
    }

    /// Each of the instance's log files is within the bound.
    static func logSizes(_ instance: APIInstance) -> [Int] {
        [instance.log, instance.log + ".1"].map { path in
            var info = stat()
            return stat(path, &info) == 0 ? Int(info.st_size) : 0
        }
    }

    static func log(_ instance: APIInstance) -> String {
        [instance.log + ".1", instance.log].map {
            (try? String(contentsOfFile: $0, encoding: .utf8)) ?? ""
        }.joined()
    }

    /// SIGTERM stops the daemon within a few seconds (before: a sparse log kept the
    /// Supervisor reading for hours, and SIGTERM waited for it).
    static func expectPromptStop(
        _ daemon: TestDaemon, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let start = Date()
        daemon.stop()
        #expect(
            Date().timeIntervalSince(start) < 3,
            "SIGTERM took \(Date().timeIntervalSince(start)) s", sourceLocation: sourceLocation)
    }

    /// Launches `arguments`, checks the daemon stays responsive until the app has exited, and
    /// returns the exited instance.
    static func attack(_ daemon: TestDaemon, _ id: String, _ arguments: [String]) throws
        -> APIInstance
    {
        let launched = try daemon.launch(id, arguments)
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            try expectResponsive(daemon)
            if try daemon.instance(launched.id).state == .exited { break }
            usleep(100_000)
        }
        let ended = try daemon.instance(launched.id)
        #expect(ended.state == .exited)
        return ended
    }

    @Test(
        "ftruncate(1, 1 TiB) then exit: refused on the pipe (EINVAL); the daemon answers and stops at once"
    )
    func truncate() throws {
        let daemon = try TestDaemon(config: "LogMaxBytes=\(Self.logMax)\n")
        try daemon.installProbe("com.example.truncate")
        let ended = try Self.attack(daemon, "com.example.truncate", ["output-truncate"])
        #expect(ended.exit?.code == 0)
        let log = Self.log(ended)
        #expect(log.contains("stdout-kind: value fifo"), "\(log)")
        #expect(log.contains("ftruncate-stdout: refused EINVAL"), "\(log)")
        #expect(Self.logSizes(ended).allSatisfy { $0 <= Self.logMax })
        try Self.expectResponsive(daemon)
        Self.expectPromptStop(daemon)
    }

    @Test("fallocate of 300 MB on stdout: refused on the pipe (ESPIPE), the log stays small")
    func fallocate() throws {
        let daemon = try TestDaemon(config: "LogMaxBytes=\(Self.logMax)\n")
        try daemon.installProbe("com.example.fallocate")
        let ended = try Self.attack(daemon, "com.example.fallocate", ["output-fallocate"])
        let log = Self.log(ended)
        #expect(log.contains("fallocate-stdout: refused ESPIPE"), "\(log)")
        #expect(Self.logSizes(ended).allSatisfy { $0 <= Self.logMax })
        Self.expectPromptStop(daemon)
    }

    @Test(
        "clearing O_APPEND and pwrite at offset 0 on stdout change nothing: the log holds every line in order"
    )
    func clearAppend() throws {
        let daemon = try TestDaemon(config: "LogMaxBytes=\(Self.logMax)\n")
        try daemon.installProbe("com.example.append")
        let ended = try Self.attack(daemon, "com.example.append", ["output-append"])
        let log = Self.log(ended)
        #expect(log.contains("pwrite-stdout: refused ESPIPE"), "\(log)")
        #expect(!log.contains("overwritten"))
        #expect(log.contains("after append"))
        #expect(log.hasPrefix("stdout-kind: value fifo\n"), "\(log)")
        Self.expectPromptStop(daemon)
    }

    @Test(
        "a 96 MiB line without a newline: the log keeps its bound of 2 x LogMaxBytes, the end arrives"
    )
    func hugeLine() throws {
        let daemon = try TestDaemon(config: "LogMaxBytes=\(Self.logMax)\n")
        try daemon.installProbe("com.example.longline")
        let ended = try Self.attack(daemon, "com.example.longline", ["output-longline", "96"])
        #expect(ended.exit?.code == 0)
        let sizes = Self.logSizes(ended)
        #expect(sizes.allSatisfy { $0 <= Self.logMax }, "\(sizes)")
        let log = Self.log(ended)
        #expect(
            log.contains("xxxx\nlongline end\noutput-longline: value done\n"), "\(log.suffix(200))")
        #expect(try daemon.logs(ended.id).hasSuffix("longline end\noutput-longline: value done\n"))
        Self.expectPromptStop(daemon)
    }

    @Test(
        "numbered lines across many rotations: none lost from the journal, the log's two files a gapless tail, follow sees each once"
    )
    func rotationLosesNothing() throws {
        let journal = try NotifyListener()
        let daemon = try TestDaemon(
            config: "LogMaxBytes=\(Self.logMax)\n", arguments: ["--journal-socket", journal.path])
        try daemon.installProbe("com.example.rotate")
        // 4,000 lines of 100 bytes over ~4 s: 400 KB, some six rotations of 64 KiB.
        let instance = try daemon.launch("com.example.rotate", ["output-paced", "4000", "1"])
        var followed = Data()
        try daemon.client.stream("/v1/instances/\(instance.id)/logs?follow=1") {
            followed.append(contentsOf: $0)
        }
        let ended = try daemon.wait(instance.id)
        let expected = (0..<4000).map {
            String(format: "output line %08d ", $0) + String(repeating: ".", count: 78)
        }

        let followedLines = String(decoding: followed, as: UTF8.self).split(separator: "\n").map(
            String.init
        )
        .filter { $0.hasPrefix("output line ") }
        #expect(followedLines == expected, "follow saw \(followedLines.count) lines")

        let logLines = Self.log(ended).split(separator: "\n").map(String.init).filter {
            $0.hasPrefix("output line ")
        }
        #expect(
            !logLines.isEmpty && logLines == Array(expected.suffix(logLines.count)),
            "\(logLines.first ?? "none")")
        // Each file shares the bound with its time index (docs/app-output.md).
        let indexBytes = [ended.log + ".idx", ended.log + ".1.idx"].reduce(0) { total, path in
            var info = stat()
            return total + (stat(path, &info) == 0 ? Int(info.st_size) : 0)
        }
        #expect(
            logLines.count * 100 + indexBytes > Self.logMax,
            "the two files hold more than one file's worth")
        #expect(Self.logSizes(ended).allSatisfy { $0 <= Self.logMax })

        #expect(journal.next(timeout: 10) { $0.contains("MESSAGE=output line 00003999 ") } != nil)
        let journaled = journal.all.filter { $0.contains("APPD_INSTANCE=\(ended.id)") }
            .compactMap { $0.split(separator: "\n").first { $0.hasPrefix("MESSAGE=output line") } }
            .map { String($0.dropFirst("MESSAGE=".count)) }
        #expect(journaled == expected, "journal has \(journaled.count) lines")
        Self.expectPromptStop(daemon)
    }

    @Test(
        "writing faster than the journal takes: the app is not stalled, the journal is told how many lines it missed, the log has all"
    )
    func slowJournal() throws {
        let journal = try NotifyListener(reading: false)
        let daemon = try TestDaemon(
            config: "LogMaxBytes=4000000\n", arguments: ["--journal-socket", journal.path])
        try daemon.installProbe("com.example.flood")
        // 20,000 lines at once into a journal that reads nothing: at 250 ms per line that
        // would be 80 minutes; dropping, the burst is in the log at once.
        let start = Date()
        let instance = try daemon.launch("com.example.flood", ["output-burst", "20000", "5"])
        var burst: Double?
        while Date().timeIntervalSince(start) < 30 {
            try Self.expectResponsive(daemon)
            if Self.log(instance).contains("burst: value sent") {
                burst = Date().timeIntervalSince(start)
                break
            }
            usleep(100_000)
        }
        // 15 s, not 80 minutes: room for a loaded machine, and far from waiting on the journal.
        #expect(burst.map { $0 < 15 } == true, "the burst took \(burst ?? -1) s to reach the log")
        // The journal reads again: the next output says what it missed, then arrives.
        journal.startReading()
        let ended = try daemon.wait(instance.id)
        let logLines = Self.log(ended).split(separator: "\n").filter {
            $0.hasPrefix("output line ")
        }
        #expect(logLines.count == 20000)
        let mine = journal.all.filter { $0.contains("APPD_INSTANCE=\(ended.id)") }
            .compactMap { $0.split(separator: "\n").first { $0.hasPrefix("MESSAGE=") } }
            .map { String($0.dropFirst("MESSAGE=".count)) }
        let noticeIndex = try #require(
            mine.firstIndex { $0.hasPrefix("appd: ") }, "\(mine.suffix(5))")
        let notice = mine[noticeIndex]
        let missed = Int(notice.dropFirst("appd: ".count).prefix { $0.isNumber }) ?? -1
        #expect(
            notice.hasSuffix(
                "lines were not forwarded to the journal (journald too slow); the log has them all")
        )
        // Before the pause it wrote `stdout-kind`, 20,000 lines and `burst: value sent`: each
        // either reached the journal or is counted in the notice.
        let taken = mine[..<noticeIndex]
        #expect(taken.count + missed == 20002, "taken \(taken.count), missed \(missed)")
        #expect(missed > 0)
        #expect(taken.filter { $0.hasPrefix("output line ") }.count == taken.count - 1)
        #expect(
            Array(mine[(noticeIndex + 1)...]) == [
                "after burst 0", "after burst 1", "after burst 2", "output-burst: value done",
            ])
        Self.expectPromptStop(daemon)
    }

    @Test(
        "output survives a daemon crash: lines written while it is down are in the log and the journal, none twice"
    )
    func survivesRestart() throws {
        let journal = try NotifyListener()
        let daemon = try TestDaemon(
            config: "LogMaxBytes=\(Self.logMax)\n", arguments: ["--journal-socket", journal.path])
        try daemon.installProbe("com.example.survive")
        let instance = try daemon.launch("com.example.survive", ["output-paced", "60", "50"])
        usleep(600_000)
        daemon.crash()
        usleep(1_000_000)
        try daemon.start()
        let ended = try daemon.wait(instance.id)
        #expect(ended.exit?.code == 0)
        let expected = (0..<60).map {
            String(format: "output line %08d ", $0) + String(repeating: ".", count: 78)
        }
        let logLines = Self.log(ended).split(separator: "\n").map(String.init).filter {
            $0.hasPrefix("output line ")
        }
        #expect(logLines == expected)
        #expect(journal.next(timeout: 10) { $0.contains("MESSAGE=output line 00000059 ") } != nil)
        let journaled = journal.all.filter { $0.contains("APPD_INSTANCE=\(ended.id)") }
            .compactMap { $0.split(separator: "\n").first { $0.hasPrefix("MESSAGE=output line") } }
            .map { String($0.dropFirst("MESSAGE=".count)) }
        #expect(journaled == expected)
        Self.expectPromptStop(daemon)
    }
}
