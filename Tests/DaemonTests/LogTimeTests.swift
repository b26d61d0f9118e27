import AppdAPI
import AppdBase
import AppdClient
import Foundation
import Testing

/// `appctl logs --timestamps/--since` (issue 16 §4): the output relay records when it read each
/// line in a time index beside the log (docs/app-output.md), and the daemon reads it. Each test
/// runs a real sandboxed Probe under a real daemon.
@Suite("appctl logs: timestamps, --since, nothing missing", .serialized, rootOnly)
struct LogTimeTests {
    /// `2026-11-24T10:00:00.123456Z rest` → (time, rest).
    /// Strict: 20 characters of date and time, a dot, six digits, `Z`, one space.
    static func split(_ line: Substring) -> (Date, String)? {
        let text = Array(line.utf8)
        guard text.count >= 28, text[19] == UInt8(ascii: "."), text[26] == UInt8(ascii: "Z"),
            text[27] == UInt8(ascii: " "), text[20..<26].allSatisfy({ (48...57).contains($0) }),
            let seconds = ISO8601DateFormatter().date(
                from: String(decoding: text[0..<19], as: UTF8.self) + "Z"),
            let micro = Int(String(decoding: text[20..<26], as: UTF8.self))
        else { return nil }
        return (
            seconds.addingTimeInterval(Double(micro) / 1_000_000),
            String(decoding: text[28...], as: UTF8.self)
        )
    }

    static func lines(_ text: String) -> [Substring] { text.split(separator: "\n") }

    @Test(
        "--timestamps puts the time each line came in front of it; --since keeps the lines from then on"
    )
    func timestampsAndSince() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.timed")
        let before = Date()
        // Six numbered lines, one a second.
        let instance = try daemon.launch("com.example.timed", ["output-paced", "6", "1000"])
        _ = try daemon.wait(instance.id)
        let after = Date()

        let stamped = try daemon.run("appctl", ["logs", "--timestamps", instance.id])
        #expect(stamped.code == 0, "\(stamped.output)")
        let parsed = Self.lines(stamped.output).compactMap(Self.split)
        #expect(
            parsed.count == Self.lines(stamped.output).count,
            "a line without its time:\n\(stamped.output)")
        let numbered = parsed.filter { $0.1.hasPrefix("output line ") }
        #expect(numbered.count == 6, "\(stamped.output)")
        // Times within the run, in order, about a second apart (the app sleeps 1 s between lines).
        for (time, _) in parsed {
            #expect(
                time >= before.addingTimeInterval(-1) && time <= after.addingTimeInterval(1),
                "\(time)")
        }
        for (earlier, later) in zip(numbered, numbered.dropFirst()) {
            let gap = later.0.timeIntervalSince(earlier.0)
            #expect(
                gap > 0.8 && gap < 3,
                "lines \(earlier.1.prefix(20)) and \(later.1.prefix(20)) are \(gap) s apart")
        }
        // Without --timestamps the bytes are the app's own.
        let plain = try daemon.run("appctl", ["logs", instance.id]).output
        #expect(Self.lines(plain).map(String.init) == parsed.map(\.1))

        // --since the middle of the gap before line 3: lines 3, 4, 5 and what came after them.
        let cut = numbered[3].0.addingTimeInterval(-0.4)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let since = try daemon.run(
            "appctl", ["logs", "--since", formatter.string(from: cut), instance.id])
        #expect(since.code == 0, "\(since.output)")
        let expected = parsed.filter { $0.0 >= cut }.map(\.1)
        #expect(Self.lines(since.output).map(String.init) == expected, "\(since.output)")
        #expect(expected.first?.hasPrefix("output line 00000003") == true, "\(expected)")
        // With -n: the later of the two starts.
        let both = try daemon.run(
            "appctl", ["logs", "--since", formatter.string(from: cut), "-n", "20", instance.id])
        #expect(Self.lines(both.output).map(String.init) == expected)
        let fewer = try daemon.run(
            "appctl", ["logs", "--since", formatter.string(from: cut), "-n", "1", instance.id])
        #expect(Self.lines(fewer.output).map(String.init) == Array(expected.suffix(1)))
        // Relative times: an hour ago is everything, a time after the app ended is nothing.
        #expect(
            Self.lines(try daemon.run("appctl", ["logs", "--since", "1h", instance.id]).output).map(
                String.init) == parsed.map(\.1))
        let future = formatter.string(from: Date().addingTimeInterval(60))
        #expect(try daemon.run("appctl", ["logs", "--since", future, instance.id]).output.isEmpty)

        // Bad times are refused with the problem named, by appctl and by the API.
        let bad = try daemon.run("appctl", ["logs", "--since", "yesterday", instance.id])
        #expect(bad.code != 0 && bad.output.contains("--since"), "\(bad.output)")
        do {
            try daemon.client.stream("/v1/instances/\(instance.id)/logs?since=soon") { _ in }
            Issue.record("since=soon was accepted")
        } catch let error as AppdError {
            #expect(
                error.code == .badRequest && error.message.contains("since 'soon'"), "\(error)")
        }
    }

    @Test(
        "-f --timestamps --since: the lines from then on, then it follows with times until the app exits"
    )
    func followStamped() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.timedf")
        let instance = try daemon.launch("com.example.timedf", ["output-paced", "8", "400"])
        #expect(
            try daemon.eventually { try daemon.logs(instance.id).contains("output line 00000002") })
        let followed = try daemon.run(
            "appctl", ["logs", "-f", "-t", "--since", "10m", instance.id])
        #expect(followed.code == 0, "\(followed.output)")
        let parsed = Self.lines(followed.output).compactMap(Self.split)
        #expect(parsed.count == Self.lines(followed.output).count, "\(followed.output)")
        #expect(parsed.filter { $0.1.hasPrefix("output line ") }.count == 8, "\(followed.output)")
        #expect(zip(parsed, parsed.dropFirst()).allSatisfy { $0.0 <= $1.0 }, "times out of order")
    }

    @Test("-f -t across rotations: every line once, in order, each with its time")
    func followStampedAcrossRotations() throws {
        let daemon = try TestDaemon(config: "LogMaxBytes=8192\n")
        try daemon.installProbe("com.example.timedrot")
        // 400 lines of 100 bytes, 2 ms apart: 40 KB, some five rotations of 8 KiB.
        let instance = try daemon.launch("com.example.timedrot", ["output-paced", "400", "2"])
        var followed = Data()
        try daemon.client.stream("/v1/instances/\(instance.id)/logs?follow=1&timestamps=1") {
            followed.append(contentsOf: $0)
        }
        let text = String(decoding: followed, as: UTF8.self)
        let parsed = Self.lines(text).compactMap(Self.split)
        #expect(parsed.count == Self.lines(text).count, "a line without its time")
        let numbered = parsed.map(\.1).filter { $0.hasPrefix("output line ") }
        let expected = (0..<400).map {
            String(format: "output line %08d ", $0) + String(repeating: ".", count: 78)
        }
        #expect(numbered == expected, "followed \(numbered.count) lines")
        #expect(zip(parsed, parsed.dropFirst()).allSatisfy { $0.0 <= $1.0 }, "times out of order")
        var info = stat()
        #expect(stat(instance.log + ".1", &info) == 0, "the log never rotated")
    }

    @Test("a line the app wrote before the request is in the answer, every time")
    func nothingMissingRightAfter() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.marked")
        let home = try daemon.client.get(
            "/v1/apps/com.example.marked/containers/data", as: APIContainer.self
        ).path
        let count = 20
        let instance = try daemon.launch("com.example.marked", ["output-marked", "\(count)"])
        for index in 0..<count {
            // The app creates marker-N right after it wrote line N: ask for the log at once.
            let marker = "\(home)/marker-\(index)"
            let deadline = Date().addingTimeInterval(10)
            while access(marker, F_OK) != 0 && Date() < deadline { usleep(500) }
            #expect(access(marker, F_OK) == 0, "marker \(index) never came")
            let text = try daemon.logs(instance.id)
            #expect(
                text.contains("marked line \(index)\n"),
                "line \(index) missing right after it was written:\n\(text)")
        }
        _ = try daemon.wait(instance.id)
    }

    @Test(
        "a relay slow to take the app's output (stopped here) holds the answer until the line is in the log"
    )
    func waitsForTheRelay() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.slowrelay")
        let home = try daemon.client.get(
            "/v1/apps/com.example.slowrelay/containers/data", as: APIContainer.self
        ).path
        let instance = try daemon.launch("com.example.slowrelay", ["output-marked", "40"])
        let launcher = try #require(instance.pid)
        #expect(try daemon.eventually { access("\(home)/marker-0", F_OK) == 0 })
        // Once the app wrote its first line the relay is there.
        let relay = try #require(outputRelay(launcher: launcher))
        kill(relay, SIGSTOP)
        defer { kill(relay, SIGCONT) }
        // Line 3 goes into the pipe while the relay sleeps; the request starts, the relay wakes
        // 300 ms later.
        #expect(try daemon.eventually { access("\(home)/marker-3", F_OK) == 0 })
        let waker = Thread {
            usleep(300_000)
            kill(relay, SIGCONT)
        }
        waker.start()
        let text = try daemon.logs(instance.id)
        #expect(text.contains("marked line 3\n"), "line 3 missing:\n\(text)")
        _ = try daemon.client.post("/v1/instances/\(instance.id)/kill", as: APIInstance.self)
    }

    @Test("attack: an app writing tiny lines cannot make the time index outgrow the log's bound")
    func tinyLinesStayBounded() throws {
        let logMax = 16 << 10
        let daemon = try TestDaemon(config: "LogMaxBytes=\(logMax)\n")
        try daemon.installProbe("com.example.tiny")
        // 3,000 lines of 2 bytes, 1.2 ms apart: a record (16 bytes) for nearly every line.
        let instance = try daemon.launch("com.example.tiny", ["output-tiny", "3000", "1200"])
        let ended = try daemon.wait(instance.id)
        #expect(ended.exit?.reason == .exited)
        let files = [ended.log, ended.log + ".idx", ended.log + ".1", ended.log + ".1.idx"]
        let sizes = files.map { path -> Int in
            var info = stat()
            return stat(path, &info) == 0 ? Int(info.st_size) : 0
        }
        // A file and its index share the bound; the instance's output takes at most twice it.
        #expect(sizes[0] + sizes[1] <= logMax, "\(sizes)")
        #expect(sizes[2] + sizes[3] <= logMax, "\(sizes)")
        #expect(sizes[1] > 0 && sizes[3] > 0, "no index was written: \(sizes)")
        // Lines are never lost to the index: the log rotated (history is shorter), and what it
        // holds is whole, each line with its time.
        let stamped = try daemon.run("appctl", ["logs", "-t", instance.id]).output
        let parsed = Self.lines(stamped).compactMap(Self.split)
        #expect(parsed.count == Self.lines(stamped).count)
        #expect(parsed.filter { $0.1 == "x" }.count > 100, "\(parsed.count) lines")
        #expect(parsed.last?.1 == "output-tiny: value done", "\(parsed.suffix(2))")
    }
}
