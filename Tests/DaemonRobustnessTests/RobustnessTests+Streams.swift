import Foundation
import Glibc
import TestSupport
import Testing

/// Answers that outlive their request (the event stream, a followed log, the `wait` long
/// poll), and clients that vanish in the middle of one: whatever the daemon held for them
/// must go with them.
extension DaemonRobustnessTests {
    @Test("the wait long poll outlives the idle timeout and answers when the instance exits")
    func waitOutlivesIdleTimeout() throws {
        let seconds = Int(TestDaemon.idleTimeout) + 2
        let instance = try launchProbe(["sleep", "\(seconds)"])
        let start = Date()
        let response = try daemon.request(
            "GET", "/v1/instances/\(instance)/wait", timeout: Double(seconds) + 10)
        #expect(response.status == 200)
        let answer = response.json as? [String: Any]
        #expect(answer?["state"] as? String == "exited")
        #expect((answer?["exit"] as? [String: Any])?["code"] as? Int == 0)
        #expect(Date().timeIntervalSince(start) > TestDaemon.idleTimeout)
        daemon.expectServing()
    }

    @Test(
        "clients that vanish from event streams, followed logs, long polls and bodies leave no fd behind"
    )
    func vanishingClients() throws {
        let instance = try launchProbe(["sleep", "60"])
        let baseline = try daemon.settledFDBaseline()
        var streams: [Wire] = []
        for path in ["/v1/events", "/v1/instances/\(instance)/logs?follow=1"] {
            for _ in 0..<10 {
                let wire = try daemon.connect()
                wire.send("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
                let head = try #require(try readHead(wire), "GET \(path)")
                #expect(
                    head.contains("200 OK")
                        && head.lowercased().contains("transfer-encoding: chunked"), "\(head)")
                streams.append(wire)
            }
        }
        for _ in 0..<10 {
            let wire = try daemon.connect()
            wire.send("GET /v1/instances/\(instance)/wait HTTP/1.1\r\nHost: x\r\n\r\n")
            streams.append(wire)
        }
        for _ in 0..<10 {
            let wire = try daemon.connect()
            wire.send(
                "POST /v1/instances/\(instance)/terminate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"gra"
            )
            streams.append(wire)
        }
        #expect(eventually { daemon.openFDCount() >= baseline + 40 }, "the streams are not open")
        // Gone without a word, in the middle of streams, polls and bodies.
        streams.removeAll()
        #expect(daemon.fdCount(settlingTo: baseline, timeout: 5) <= baseline)
        // Still running, and still answering: the vanished clients did not take it along.
        let info = try daemon.request("GET", "/v1/instances/\(instance)").json as? [String: Any]
        #expect(["inactive", "active", "background"].contains(info?["state"] as? String ?? ""))
        daemon.expectServing()
    }

    @Test("an event stream delivers to the clients still there after others vanished")
    func eventsAfterVanishing() throws {
        // Each closes as soon as its stream has begun.
        for _ in 0..<10 {
            let wire = try daemon.connect()
            wire.send("GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = try readHead(wire)
        }
        let listener = try daemon.connect()
        listener.send("GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
        _ = try #require(try readHead(listener))
        let installed = try daemon.request(
            "POST", "/v1/apps?name=Probe.app", body: try probeBundleArchive(),
            headers: [("Content-Type", "application/x-tar")])
        #expect(installed.status == 201)
        let events = String(decoding: listener.readToEnd(timeout: 1).bytes, as: UTF8.self)
        #expect(
            events.contains("\"installed\"") && events.contains("com.example.probe"), "\(events)")
        daemon.expectServing()
    }

    @Test(
        "SIGTERM with a long poll, event streams and followed logs open: appd stops at once and tells them"
    )
    func stopWithClientsAttached() throws {
        let instance = try launchProbe(["sleep", "60"])
        let appPID = try #require(try launchedPID(instance))
        let waiter = try daemon.connect()
        waiter.send("GET /v1/instances/\(instance)/wait HTTP/1.1\r\nHost: x\r\n\r\n")
        var streams: [Wire] = []
        for path in ["/v1/events", "/v1/instances/\(instance)/logs?follow=1"] {
            let wire = try daemon.connect()
            wire.send("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = try #require(try readHead(wire), "GET \(path)")
            streams.append(wire)
        }
        let stopped = daemon.terminate(within: 5)
        #expect(stopped != nil, "appd serve still runs 5 s after SIGTERM")
        let answer = try waiter.readResponse(timeout: 2)
        #expect(answer.map(outcome) == "503 unavailable", "the waiter was not told")
        for wire in streams { #expect(wire.readToEnd(timeout: 2).closed) }
        // The app was not part of appd's stop: it keeps running for the next start to adopt.
        #expect(kill(appPID, 0) == 0)
    }

    @Test("a request still sending its body when appd stops is answered 503 unavailable")
    func stopWithBodyInFlight() throws {
        let wire = try daemon.connect()
        wire.send(
            "POST /v1/apps/com.example.x/launch HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"argu"
        )
        usleep(200_000)
        #expect(daemon.terminate(within: 5) != nil, "appd serve still runs 5 s after SIGTERM")
        let answer = try wire.readResponse(timeout: 2)
        #expect(answer.map(outcome) == "503 unavailable")
    }

    @Test(
        "an app's launcher holds only the descriptors placed for it: no client connection, no listening socket"
    )
    func launcherInheritsNothing() throws {
        // Connections open while the launch happens, one of them the launch's own.
        let watchers = try (0..<3).map { _ in try daemon.connect() }
        for wire in watchers { wire.send("GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n") }
        let instance = try launchProbe(["sleep", "30"])
        let info = try #require(
            try daemon.request("GET", "/v1/instances/\(instance)").json as? [String: Any])
        let cgroup = try #require(info["cgroup"] as? String)
        // The launcher moves itself into the cgroup (launcher-protocol.md): give it a moment.
        var pids: [String] = []
        for _ in 0..<100 where pids.count < 2 {
            usleep(20_000)
            pids = instanceProcesses(cgroup: cgroup).map(String.init)
        }
        #expect(pids.count >= 2, "the launcher and the app in \(cgroup): \(pids)")
        for pid in pids {
            // 0-2 are the app's stdio; 3-5 what appd-exec is given (profile, filter, status);
            // 6 the lifecycle channel (a SEQPACKET socket) until the launcher has forked and
            // handed it on as the app's fd 3; 7 and 8 the output relay's pipe (read end) and log
            // folder (docs/app-output.md), kept by the relay alone (its lock, a memfd it makes
            // after closing the rest, takes fd 3). Client connections are stream sockets.
            let fds = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")
                .compactMap { Int($0) }
            let seqpacket = Self.seqpacketSocketInodes()
            // An fd closed between the listing and its readlink (the launcher hands fd 6 on
            // while we look) is not held: it is skipped, not reported as "?".
            let stray = fds.filter { $0 > 5 }.compactMap { fd in
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"))
                    .map { "\(fd) -> \($0)" }
            }.filter { entry in
                !(entry.hasPrefix("6 -> socket:[")
                    && seqpacket.contains(String(entry.dropFirst("6 -> socket:[".count).dropLast())))
                    && !entry.hasPrefix("7 -> pipe:[")
                    && !(entry.hasPrefix("8 -> /") && entry.hasSuffix("/logs/com.example.probe"))
            }
            #expect(stray.isEmpty, "pid \(pid) holds \(stray)")
        }
        withExtendedLifetime(watchers) {}
        daemon.expectServing()
    }

    // MARK: Helpers

    /// Installs the probe app and launches it with `arguments`; the instance id.
    func launchProbe(_ arguments: [String]) throws -> String {
        let installed = try daemon.request(
            "POST", "/v1/apps?name=Probe.app", body: try probeBundleArchive(),
            headers: [("Content-Type", "application/x-tar")])
        try #require(
            installed.status == 201, "install: \(String(decoding: installed.body, as: UTF8.self))")
        let body = try JSONSerialization.data(withJSONObject: ["arguments": arguments])
        let launched = try daemon.request(
            "POST", "/v1/apps/com.example.probe/launch", body: Array(body),
            headers: [("Content-Type", "application/json")])
        try #require(
            launched.status == 201, "launch: \(String(decoding: launched.body, as: UTF8.self))")
        return try #require((launched.json as? [String: Any])?["id"] as? String)
    }

    func launchedPID(_ instance: String) throws -> pid_t? {
        let info = try daemon.request("GET", "/v1/instances/\(instance)").json as? [String: Any]
        return (info?["pid"] as? Int).map { pid_t($0) }
    }

    /// The head of a streamed answer, which has no end to wait for.
    func readHead(_ wire: Wire, timeout: Double = 5) throws -> String? {
        let deadline = Date(timeIntervalSinceNow: timeout)
        var bytes: [UInt8] = []
        while Date() < deadline {
            let exchange = wire.readToEnd(timeout: 0.05)
            bytes += exchange.bytes
            if let end = find([13, 10, 13, 10], in: bytes[...]) {
                return String(decoding: bytes[..<end], as: UTF8.self)
            }
            if exchange.closed { return nil }
        }
        return nil
    }
}

extension DaemonRobustnessTests {
    /// Inodes of the AF_UNIX sockets of type SOCK_SEQPACKET (5), from /proc/net/unix.
    static func seqpacketSocketInodes() -> Set<String> {
        let table = readKernelFile("/proc/net/unix").split(separator: "\n").dropFirst()
        return Set(
            table.compactMap { line in
                let columns = line.split(separator: " ", omittingEmptySubsequences: true)
                return columns.count > 6 && columns[4] == "0005" ? String(columns[6]) : nil
            })
    }
}
