import AppdAPI
import AppdBase
import AppdClient
import Foundation
import Testing

/// `GET /v1/events?since=` (issue 16 §4): the daemon keeps its recent events, so that a client
/// that reconnects gets what it missed, and a `gap` event when it no longer has them.
@Suite("appctl events --since: replay after a reconnect", .serialized, rootOnly)
struct EventReplayTests {
    /// The events of `GET path` until `enough` says so (or 20 s), then the connection is dropped,
    /// as a client that goes away does.
    static func collect(_ daemon: TestDaemon, _ path: String, until enough: ([APIEvent]) -> Bool)
        throws -> [APIEvent]
    {
        var events: [APIEvent] = []
        var done = false
        let client = AppdClient(socketPath: daemon.socket, timeout: 20)
        do {
            try client.streamLines(path) { line in
                guard !line.isEmpty else { return }
                events.append(try APICoding.decoder().decode(APIEvent.self, from: line))
                if enough(events) {
                    done = true
                    throw CancellationError()
                }
            }
        } catch {
            guard done else { throw error }
        }
        return events
    }

    @Test(
        "a client that reconnects with the last seq it saw gets exactly what it missed, then what comes"
    )
    func replayAfterReconnect() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.replay")
        // Connected (the install replayed first): sees the first launch, then goes away.
        var first: APIInstance?
        let seen = try Self.collect(daemon, "/v1/events?since=0") { events in
            if first == nil { first = try? daemon.launch("com.example.replay", ["exit", "0"]) }
            return events.contains { $0.kind == .launched }
        }
        let last = try #require(seen.last).seq
        _ = try daemon.wait(try #require(first).id)
        // While it is away: a second instance runs and ends.
        let second = try daemon.launch("com.example.replay", ["exit", "3"])
        _ = try daemon.wait(second.id)

        let replayed = try Self.collect(daemon, "/v1/events?since=\(last)") { events in
            events.contains { $0.kind == .exited && $0.instance == second.id }
        }
        #expect(!replayed.contains { $0.kind == .gap }, "\(replayed)")
        #expect(
            replayed.map(\.seq) == Array((last + 1)...(last + replayed.count)),
            "seqs: \(replayed.map(\.seq))")
        #expect(replayed.contains { $0.kind == .exited && $0.instance == first?.id })
        #expect(replayed.contains { $0.kind == .launched && $0.instance == second.id })
        #expect(replayed.last?.exit?.code == 3)

        // After the replay it follows: a third launch arrives on the same connection.
        var third: APIInstance?
        let thenLive = try Self.collect(daemon, "/v1/events?since=\(last)") { events in
            if third == nil,
                events.contains(where: { $0.kind == .exited && $0.instance == second.id })
            {
                third = try? daemon.launch("com.example.replay", ["exit", "0"])
            }
            return third.map { id in
                events.contains { $0.kind == .launched && $0.instance == id.id }
            } ?? false
        }
        #expect(thenLive.map(\.seq) == Array((last + 1)...(last + thenLive.count)))

        // By time: everything from just before the second launch.
        let at = try #require(replayed.first { $0.kind == .launched && $0.instance == second.id })
            .time
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let byTime = try Self.collect(
            daemon,
            AppdClient.path(
                "events", query: ["since": formatter.string(from: at.addingTimeInterval(-0.0005))])
        ) { events in
            events.contains { $0.kind == .exited && $0.instance == second.id }
        }
        #expect(
            byTime.first?.kind == .launched && byTime.first?.instance == second.id,
            "\(byTime.prefix(2))")

        // The Last-Event-ID header means the same as since=, from a plain HTTP client.
        let curl = try TestDaemon.run(
            "/usr/bin/curl",
            [
                "-sS", "-m", "2", "--unix-socket", daemon.socket, "-H", "Last-Event-ID: \(last)",
                "http://localhost/v1/events",
            ])
        let lines = curl.output.split(separator: "\n").compactMap {
            try? APICoding.decoder().decode(APIEvent.self, from: Data($0.utf8))
        }
        #expect(lines.first?.seq == last + 1, "\(curl.output.prefix(400))")

        // appctl takes a seq or a time, and names a bad one.
        let bad = try daemon.run("appctl", ["events", "--since", "yesterday"])
        #expect(
            bad.code != 0
                && bad.output.contains("--since 'yesterday' is neither an event seq nor a time"),
            "\(bad.output)")
        do {
            _ = try Self.collect(daemon, "/v1/events?since=soon") { _ in true }
            Issue.record("since=soon was accepted")
        } catch let error as AppdError {
            #expect(
                error.code == .badRequest && error.message.contains("since 'soon'"), "\(error)")
        }
    }

    @Test(
        "events the daemon no longer holds are announced by a gap event, then all it holds follows")
    func gapWhenTheRingHasMovedOn() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.gap")
        let instance = try daemon.launch("com.example.gap", ["lifecycle"])
        #expect(try daemon.eventually { try daemon.instance(instance.id).channel == .ready })
        let start = try Self.collect(daemon, "/v1/events?since=0") { events in
            events.contains { $0.kind == .message && $0.detail == "<- ready" }
        }
        let last = try #require(start.last).seq
        // Each memory warning to the one app on the channel is an event: more than the 4,096
        // the daemon keeps.
        for _ in 0..<4200 {
            _ = try daemon.client.post("/v1/memory-warning", as: APIMemoryWarning.self)
        }
        var newest = 0
        _ = try Self.collect(daemon, "/v1/events?since=0") { events in
            newest = events.last?.seq ?? 0
            return newest >= last + 4200
        }
        let replayed = try Self.collect(daemon, "/v1/events?since=\(last)") { events in
            events.last?.seq == newest
        }
        let gap = try #require(replayed.first)
        #expect(gap.kind == .gap, "\(gap)")
        #expect(
            gap.detail?.contains("events \(last + 1) to \(gap.seq) are no longer held") == true,
            "\(gap.detail ?? "")")
        let held = replayed.dropFirst()
        #expect(held.count <= 4096 && held.count > 3000, "\(held.count) replayed")
        #expect(held.first?.seq == gap.seq + 1)
        #expect(held.map(\.seq) == Array((gap.seq + 1)...newest))

        // A seq from before a restart (this daemon numbers from 1 again): a gap that says so,
        // then everything it holds.
        daemon.stop()
        try daemon.start()
        let restarted = try Self.collect(daemon, "/v1/events?since=\(newest)") { _ in true }
        #expect(restarted.first?.kind == .gap, "\(restarted)")
        #expect(
            restarted.first?.detail?.contains("newer than any this daemon sent") == true,
            "\(restarted)")
    }
}
