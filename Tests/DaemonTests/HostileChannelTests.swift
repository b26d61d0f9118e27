import AppdAPI
import AppdClient
import Foundation
import Testing

/// Issue 13 §1: a sandboxed app with no entitlements attacks the daemon through its lifecycle
/// channel (`probe attack-channel`, Examples/Probe/attack_channel.c).
@Suite("hostile lifecycle channels", .serialized, rootOnly)
struct HostileChannelTests {
    static let hello = #"{"type":"hello","version":1}"#

    /// Each list is what one attacking instance sends, in order. The first ones crashed appd
    /// ("Double value cannot be converted to Int").
    static let attacks: [[String]] = [
        [#"{"type":"hello","version":1e19}"#],
        [#"{"type":"hello","version":-1e19}"#],
        [hello, #"{"type":"beginBackgroundTask","name":"x","ref":1e300}"#],
        [hello, #"{"type":"endBackgroundTask","task":1e300}"#],
        [hello, #"{"type":"endBackgroundTask","task":-1e300}"#],
        [hello, #"{"type":"beginBackgroundTask","seconds":1e400}"#],
        [hello, #"{"type":"endBackgroundTask","task":"1"}"#],
        [hello, #"{"type":"endBackgroundTask","task":1.5}"#],
        [hello, #"{"type":"ready","type":"hello"}"#],
        [hello, "@nonutf8"],
        [hello, "@deep"],
        [hello, "@longnumber"],
        [hello, "@huge"],
        [hello, "@nul"],
    ]

    /// A victim that speaks the channel and holds a background task once it is sent away.
    func victim(_ daemon: TestDaemon) throws -> APIInstance {
        try daemon.installProbe("com.example.victim")
        let victim = try daemon.launch("com.example.victim", ["lifecycle", "task", "600"])
        #expect(try daemon.eventually { try daemon.instance(victim.id).channel == .ready })
        return victim
    }

    func expectVictimUntouched(_ daemon: TestDaemon, _ victim: APIInstance) throws {
        // Sent to the background by the attackers' launches: it holds its task, so it is
        // neither frozen nor killed, and still speaks the channel.
        #expect(try daemon.eventually { try daemon.instance(victim.id).backgroundTasks == 1 })
        let now = try daemon.instance(victim.id)
        #expect(now.channel == .ready)
        #expect(now.state == .background)
        #expect(now.exit == nil)
        #expect(try daemon.received(victim.id).contains("backgroundTaskBegan"))
    }

    @Test(
        "out-of-range, wrong-typed, nested, huge, duplicate, non-UTF-8 messages: each closes only its sender's channel; the daemon lives, another app keeps its channel and its background task"
    )
    func hostileMessages() throws {
        let daemon = try TestDaemon(config: lifecycleConfig("BackgroundTaskTime=300\n"))
        let victim = try victim(daemon)
        try daemon.installProbe("com.example.attacker")
        let pid = try daemon.client.get("/v1/version", as: APIDaemonInfo.self).pid
        let watch = try EventWatch(daemon)
        let root = Responsiveness(daemon)
        var attackers: [String] = []
        for messages in Self.attacks {
            let attacker = try daemon.launch(
                "com.example.attacker", ["attack-channel", "send"] + messages)
            attackers.append(attacker.id)
            #expect(
                try daemon.eventually {
                    try daemon.logs(attacker.id).contains("attack-channel: value closed")
                },
                "\(messages.last ?? ""): the daemon did not close the attacker's channel")
            // The socket closes as the reader finds the error; the supervisor records it just
            // after.
            #expect(
                try daemon.eventually {
                    let channel = try daemon.instance(attacker.id).channel
                    return channel != .ready && channel != .launching
                }, "\(messages.last ?? "")")
            // The app itself is not punished: it runs on as a plain program.
            #expect(try daemon.instance(attacker.id).exit == nil, "\(messages.last ?? "")")
            #expect(
                try daemon.client.get("/v1/version", as: APIDaemonInfo.self).pid == pid,
                "appd restarted after \(messages.last ?? "")")
            _ = try daemon.client.post("/v1/instances/\(attacker.id)/kill", as: APIInstance.self)
        }
        root.expectResponsive("hostile messages")
        #expect(!daemon.serveLog.contains("Fatal error"))
        try expectVictimUntouched(daemon, victim)

        let events = watch.stop(until: { events in
            attackers.allSatisfy { attacker in
                events.contains {
                    $0.instance == attacker && ($0.detail ?? "").hasPrefix("channel closed: ")
                }
            }
        })
        for attacker in attackers {
            let closed = events.filter {
                $0.instance == attacker && ($0.detail ?? "").hasPrefix("channel closed: ")
            }
            #expect(closed.count == 1, "no event says why \(attacker)'s channel was closed")
        }
        #expect(
            events.contains {
                ($0.detail ?? "").contains("\"version\" is 1e19, not a whole number")
            })
        #expect(events.contains { ($0.detail ?? "").contains("appears twice") })
        #expect(events.contains { ($0.detail ?? "").contains("nested more than") })
        #expect(events.contains { ($0.detail ?? "").contains("not valid UTF-8") })
        #expect(
            events.contains {
                ($0.detail ?? "").contains("65537 bytes")
                    || ($0.detail ?? "").contains("66561 bytes")
            })
        try daemon.expectStillWorks("hostile-messages")
    }

    @Test(
        "a flood of unknown messages: the flooder's channel is closed, nothing is stored or published, memory comes back, root and another client's events are served throughout"
    )
    func flood() throws {
        let daemon = try TestDaemon(config: lifecycleConfig("BackgroundTaskTime=300\n"))
        let victim = try victim(daemon)
        try daemon.installProbe("com.example.flooder")
        // Warm up every path the flood takes (a launch, a channel, a protocol error, a kill),
        // so the baseline holds what the daemon keeps anyway.
        let warm = try daemon.launch(
            "com.example.flooder", ["attack-channel", "send", Self.hello, "{"])
        #expect(
            try daemon.eventually {
                try daemon.logs(warm.id).contains("attack-channel: value closed")
            })
        _ = try daemon.client.post("/v1/instances/\(warm.id)/kill", as: APIInstance.self)
        usleep(1_000_000)
        let baseline = daemon.residentKiB

        let watch = try EventWatch(daemon)
        let root = Responsiveness(daemon)
        let started = Date()
        // Four as fast as they can, one just under the rate (50 a second: left open).
        var fast: [APIInstance] = []
        for _ in 0..<4 {
            fast.append(
                try daemon.launch("com.example.flooder", ["attack-channel", "flood", "15"]))
        }
        let slow = try daemon.launch(
            "com.example.flooder", ["attack-channel", "flood", "15", "50"])
        for flooder in fast {
            #expect(
                try daemon.eventually {
                    try daemon.logs(flooder.id).contains("attack-channel: value closed")
                },
                "a flooder's channel was not closed within 5 s")
        }
        let closedAfter = Date().timeIntervalSince(started)
        var peak = daemon.residentKiB
        while Date().timeIntervalSince(started) < 17 {
            peak = max(peak, daemon.residentKiB)
            usleep(200_000)
        }
        #expect(
            try daemon.eventually {
                try daemon.logs(slow.id).contains("attack-channel: value open after")
            })
        #expect(try daemon.instance(slow.id).channel == .ready)
        // A marker after the flood: another client's event stream is not drowned; it shows
        // up there.
        let marker = try daemon.launch("com.example.flooder", ["sleep", "30"])
        root.expectResponsive("flood")
        let events = watch.stop(until: {
            $0.contains { $0.instance == marker.id && $0.kind == .launched }
        })
        #expect(events.contains { $0.instance == marker.id && $0.kind == .launched })
        let fromFlooders = events.filter { event in
            (fast + [slow]).contains { $0.id == event.instance }
        }
        #expect(
            !events.contains { ($0.detail ?? "").contains("flood-") },
            "an unknown message was published")
        // launched, state changes, hello, ready, channel closed: a handful each, not thousands.
        #expect(fromFlooders.count < 100, "\(fromFlooders.count) events from the flooders")
        for flooder in fast {
            let detail = events.first {
                $0.instance == flooder.id && ($0.detail ?? "").hasPrefix("channel closed: ")
            }?.detail
            #expect(
                detail?.contains("messages a second") == true, "\(detail ?? "no closing event")")
        }

        let sent = try (fast + [slow]).map { flooder in
            try daemon.logs(flooder.id).split(separator: "\n").first {
                $0.contains("attack-channel: value sent")
            }.map(String.init) ?? "?"
        }
        for instance in fast + [slow, marker] {
            _ = try? daemon.client.post("/v1/instances/\(instance.id)/kill", as: APIInstance.self)
        }
        usleep(2_000_000)
        let after = daemon.residentKiB
        print(
            "flood: fast channels closed within \(String(format: "%.1f", closedAfter)) s; flooders: \(sent)"
        )
        print(
            "flood: appd RSS baseline \(baseline) KiB, peak \(peak) KiB, after \(after) KiB (\(after - baseline) KiB)"
        )
        #expect(
            after - baseline < 4 * 1024, "RSS \(baseline) KiB before the flood, \(after) KiB after")
        try expectVictimUntouched(daemon, victim)
        try daemon.expectStillWorks("flood")
    }

    @Test(
        "known messages repeated within the rate (ready, ends of tasks it does not hold, refused begins) are answered but not published: another client's events are not drowned"
    )
    func repeatedKnownMessages() throws {
        let daemon = try TestDaemon(
            config: lifecycleConfig("BackgroundTaskTime=300\nActivePolicy=all\n"))
        try daemon.installProbe("com.example.repeater")
        let watch = try EventWatch(daemon)
        let root = Responsiveness(daemon)
        let messages = [
            #"{"type":"ready"}"#, #"{"type":"hello","version":1}"#,
            #"{"type":"endBackgroundTask","task":999}"#,
            #"{"type":"beginBackgroundTask","name":"x"}"#,
        ]
        // 90 a second for 5 s each: under the rate, so the channels stay open.
        let repeaters = try messages.map {
            try daemon.launch("com.example.repeater", ["attack-channel", "flood", "5", "90", $0])
        }
        for repeater in repeaters {
            #expect(
                try daemon.eventually {
                    try daemon.logs(repeater.id).contains("attack-channel: value open after")
                })
            #expect(try daemon.instance(repeater.id).channel == .ready)
        }
        let marker = try daemon.launch("com.example.repeater", ["sleep", "30"])
        root.expectResponsive("repeated known messages")
        let events = watch.stop(until: {
            $0.contains { $0.instance == marker.id && $0.kind == .launched }
        })
        #expect(events.contains { $0.instance == marker.id && $0.kind == .launched })
        for (repeater, message) in zip(repeaters, messages) {
            let count = events.filter { $0.instance == repeater.id && $0.kind == .message }.count
            // hello, ready, the messages sent to it, and for begin the 16 tasks granted
            // (MaxBackgroundTasks); not one per message (about 450).
            #expect(count < 40, "\(count) message events from an app repeating \(message)")
        }
        #expect(try daemon.instance(repeaters[3].id).backgroundTasks == 16)
        for instance in repeaters + [marker] {
            _ = try? daemon.client.post("/v1/instances/\(instance.id)/kill", as: APIInstance.self)
        }
        try daemon.expectStillWorks("repeated")
    }
}
