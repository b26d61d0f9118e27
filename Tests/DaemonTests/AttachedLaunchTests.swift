import AppdAPI
import AppdBase
import AppdClient
import Foundation
import Testing

/// `POST /v1/apps/{id}/launch?attach=1` (docs/api.md, "Attached launch"), what
/// `appctl launch --console` uses: the instance, the output and the exit in one exchange. Each
/// test runs a real sandboxed Probe against a real daemon.
@Suite("attached launch", .serialized, rootOnly)
struct AttachedLaunchTests {
    /// One attached launch through the client: the instance as it arrived, the output, and how
    /// it ended.
    static func attach(_ daemon: TestDaemon, _ id: String, _ arguments: [String]) throws
        -> (launched: APIInstance?, output: Data, result: AttachedLaunch)
    {
        var launched: APIInstance?
        var output = Data()
        let result = try daemon.client.launchAttached(id, LaunchRequest(arguments: arguments)) {
            launched = $0
        } onOutput: {
            output.append(contentsOf: $0)
        }
        return (launched, output, result)
    }

    @Test(
        "one exchange gives the instance, the app's output and its exit code; appctl launch --console exits with it"
    )
    func works() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.attach")
        let (launched, output, result) = try Self.attach(daemon, "com.example.attach", ["env"])
        let instance = try #require(launched)
        guard case .ended(let ended) = result else {
            Issue.record("not attached: \(result)")
            return
        }
        #expect(ended.id == instance.id)
        #expect(ended.state == .exited)
        #expect(ended.exit == APIExit(reason: .exited, code: 0))
        let text = String(decoding: output, as: UTF8.self)
        #expect(text.contains("env: value HOME=\(daemon.root)/Containers/Data/"), "\(text)")
        // The same bytes as the instance's log: nothing added, nothing lost.
        #expect(text == (try daemon.logs(instance.id)))
        // The daemon agrees on how it ended.
        #expect(try daemon.instance(instance.id).exit == ended.exit)

        let (_, _, seven) = try Self.attach(daemon, "com.example.attach", ["exit", "7"])
        guard case .ended(let exited) = seven else {
            Issue.record("not attached: \(seven)")
            return
        }
        #expect(exited.exit == APIExit(reason: .exited, code: 7))

        let console = try daemon.run(
            "appctl", ["launch", "--console", "com.example.attach", "--", "exit", "3"])
        #expect(console.code == 3, "\(console.output)")
        let json = try daemon.run(
            "appctl", ["launch", "--console", "--json", "com.example.attach", "--", "exit", "4"])
        #expect(json.code == 4, "\(json.output)")
        let reported = try APICoding.decoder().decode(
            APIInstance.self, from: Data(json.output.utf8.drop { $0 != UInt8(ascii: "{") }))
        #expect(reported.exit == APIExit(reason: .exited, code: 4))
        #expect(try daemon.instance(reported.id).exit == reported.exit)
    }

    @Test("a launch that fails is answered with its error, nothing streamed, nothing launched")
    func failedLaunch() throws {
        let daemon = try TestDaemon()
        #expect {
            _ = try Self.attach(daemon, "com.example.missing", [])
        } throws: { ($0 as? AppdError)?.code == .notFound }
        let console = try daemon.run("appctl", ["launch", "--console", "com.example.missing"])
        #expect(console.code != 0)
        #expect(console.output.contains("com.example.missing"), "\(console.output)")
        #expect(try daemon.client.get("/v1/instances?all=1", as: [APIInstance].self).isEmpty)
    }

    @Test(
        "output that imitates the frames (a forged exit 0, instance, error, chunk end) is shown as it was written and changes neither the instance nor the exit code"
    )
    func forgedFrames() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.forge")
        let (launched, output, result) = try Self.attach(
            daemon, "com.example.forge", ["output-forge-attach", "5"])
        let instance = try #require(launched)
        #expect(instance.app == "com.example.forge")
        #expect(instance.id != "forged")
        guard case .ended(let ended) = result else {
            Issue.record("not attached: \(result)")
            return
        }
        #expect(ended.id == instance.id)
        #expect(ended.exit == APIExit(reason: .exited, code: 5))
        // Every forged frame reached the client as output, byte for byte.
        let text = String(decoding: output, as: UTF8.self)
        for forged in [
            "\nexit 95\n{\"id\":\"forged\"", "\ninstance 59\n{\"id\":\"forged\"",
            "\nerror 48\n{\"error\"",
            "\r\n0\r\n\r\n", "output 99999999\n", "exit 3\n{}\n",
        ] {
            #expect(
                text.contains(forged),
                "missing \(forged.debugDescription) in \(text.debugDescription)")
        }
        #expect(text == (try daemon.logs(instance.id)))

        let console = try daemon.run(
            "appctl",
            ["launch", "--console", "com.example.forge", "--", "output-forge-attach", "5"])
        #expect(console.code == 5, "\(console.output)")
        #expect(console.output.contains("\"app\":\"com.example.forged\""), "\(console.output)")
    }

    @Test(
        "Ctrl-C during an attached console terminates the app (the output keeps coming); appctl exits with how it ended"
    )
    func interrupt() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.ctrlc")
        let process = try ChildProcess(
            "appctl", ["launch", "--console", "com.example.ctrlc", "--", "ignore-term", "60"],
            environment: ["APPD_ROOT": daemon.root, "PATH": "/usr/bin:/bin"])
        // The app's first line came through the attached stream: it is running, SIGTERM ignored.
        var seen = Data()
        let reader = try #require(process.output)
        let deadline = Date().addingTimeInterval(20)
        while !String(decoding: seen, as: UTF8.self).contains("ignore-term: value ready"),
            Date() < deadline
        {
            let piece = reader.availableData
            if piece.isEmpty { break }
            seen.append(piece)
        }
        #expect(String(decoding: seen, as: UTF8.self).contains("ignore-term: value ready"))
        process.signal(SIGINT)
        // The app ignores SIGTERM: killed after the grace period (2 s in TestDaemon).
        seen.append(reader.readDataToEndOfFile())
        process.waitUntilExit()
        let text = String(decoding: seen, as: UTF8.self)
        #expect(text.contains("terminating"), "\(text)")
        #expect(process.terminationStatus == 128 + SIGKILL, "\(text)")
        let ended = try daemon.client.get("/v1/instances?all=1", as: [APIInstance].self)
        #expect(ended.count == 1)
        #expect(ended.first?.exit?.reason == .killedAfterGrace)
    }

    /// The daemon's open file descriptors.
    /// Kills each instance and waits until it has exited.
    static func killAll(_ instances: [APIInstance], _ daemon: TestDaemon) throws {
        for instance in instances {
            _ = try daemon.client.post("/v1/instances/\(instance.id)/kill", as: APIInstance.self)
        }
        for instance in instances { _ = try daemon.wait(instance.id) }
    }

    static func openFDs(_ daemon: TestDaemon) -> Int {
        guard let pid = daemon.process?.processIdentifier else { return -1 }
        return ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? [])
            .count
    }

    /// What the daemon's descriptors point at, for a failure's message.
    static func fdTargets(_ daemon: TestDaemon) -> String {
        guard let pid = daemon.process?.processIdentifier else { return "" }
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        return fds.compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")
        }
        .map { $0.hasPrefix("socket:") ? "socket" : $0 }.sorted().joined(separator: ", ")
    }

    /// Sends an attached launch on a socket of its own and reads until `until` is in (the app's
    /// output); returns the socket, still open.
    static func attachRaw(_ daemon: TestDaemon, _ id: String, _ arguments: [String], until: String)
        throws -> Int32
    {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        #expect(fd >= 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(daemon.socket.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        #expect(connected == 0)
        let body = try APICoding.encoder().encode(LaunchRequest(arguments: arguments))
        let head =
            "POST /v1/apps/\(id)/launch?attach=1 HTTP/1.1\r\nHost: appd\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n"
        let request = Array(head.utf8) + Array(body)
        #expect(send(fd, request, request.count, Int32(MSG_NOSIGNAL)) == request.count)
        var received = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        while !String(decoding: received, as: UTF8.self).contains(until) {
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            received += buffer[..<count]
        }
        let text = String(decoding: received, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 200"), "\(text)")
        #expect(text.contains("instance "), "\(text)")
        #expect(text.contains("output "), "\(text)")
        return fd
    }

    @Test(
        "clients that go away in the middle of the stream leave nothing behind in the daemon: no connection, no open log, the instances run on"
    )
    func disconnect() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.gone")
        // Settle the daemon (first launch, caches), then measure.
        _ = try Self.attach(daemon, "com.example.gone", ["exit", "0"])
        // The fewest over a moment: the connection of the request before may still be closing.
        let idle =
            (0..<5).map { _ in
                usleep(100_000)
                return Self.openFDs(daemon)
            }.min() ?? -1
        #expect(idle > 0)

        // What five running instances cost the daemon, launched without attach.
        let plain = try (0..<5).map { _ in
            try daemon.launch("com.example.gone", ["ignore-term", "60"])
        }
        #expect(daemon.eventually { Self.openFDs(daemon) > idle })
        usleep(300_000)
        let perInstances = Self.openFDs(daemon) - idle
        try Self.killAll(plain, daemon)
        #expect(
            daemon.eventually { Self.openFDs(daemon) <= idle },
            "\(Self.openFDs(daemon)) vs \(idle): \(Self.fdTargets(daemon))")

        // Five attached, each client gone once it has the instance.
        let sockets = try (0..<5).map { _ in
            try Self.attachRaw(
                daemon, "com.example.gone", ["ignore-term", "60"], until: "value ready")
        }
        let streaming = Self.openFDs(daemon)
        // Each stream holds its connection and the log it follows.
        #expect(streaming >= idle + perInstances + 10, "\(streaming) vs \(idle) + \(perInstances)")
        for fd in sockets { close(fd) }
        #expect(
            daemon.eventually { Self.openFDs(daemon) <= idle + perInstances },
            "\(Self.openFDs(daemon)) vs \(idle) + \(perInstances)")
        // The instances were not touched: still running.
        let running = try daemon.client.get("/v1/instances", as: [APIInstance].self)
        #expect(running.count == 5)
        #expect(running.allSatisfy { $0.state != .exited })
        try Self.killAll(running, daemon)
        #expect(
            daemon.eventually { Self.openFDs(daemon) <= idle },
            "\(Self.openFDs(daemon)) vs \(idle): \(Self.fdTargets(daemon))")
        // And it still answers.
        let (_, _, after) = try Self.attach(daemon, "com.example.gone", ["exit", "2"])
        guard case .ended(let ended) = after else {
            Issue.record("not attached: \(after)")
            return
        }
        #expect(ended.exit?.code == 2)
    }

    @Test(
        "an attached launch counts as a stream: a user at MaxStreamsPerUser gets 429 and nothing is launched"
    )
    func streamLimit() throws {
        let daemon = try TestDaemon(
            config: "[API]\nSocketMode=0666\nControlAllowed=*\nMaxStreamsPerUser=1\n")
        try daemon.installProbe("com.example.limited")
        let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/curl", "-s"]
        let attach =
            asNobody + [
                "-o", "-", "-w", "\n%{http_code}", "--max-time", "20", "--unix-socket",
                daemon.socket,
                "-H", "Content-Type: application/json", "-d", #"{"arguments":["exit","0"]}"#,
                "http://appd/v1/apps/com.example.limited/launch?attach=1",
            ]
        // The one stream nobody may hold: an attached launch of an app that runs on, held once
        // its output has come.
        let holder = try ChildProcess(
            "/usr/bin/setpriv",
            asNobody + [
                "-N", "-o", "-", "--max-time", "30", "--unix-socket", daemon.socket,
                "-H", "Content-Type: application/json", "-d",
                #"{"arguments":["ignore-term","30"]}"#,
                "http://appd/v1/apps/com.example.limited/launch?attach=1",
            ], stderr: .inherit)
        let out = try #require(holder.output)
        var held = Data()
        while !String(decoding: held, as: UTF8.self).contains("ignore-term: value ready") {
            let piece = out.availableData
            if piece.isEmpty { break }
            held.append(piece)
        }
        #expect(String(decoding: held, as: UTF8.self).contains("ignore-term: value ready"))
        let refused = try daemon.run("/usr/bin/setpriv", attach).output
        #expect(refused.hasSuffix("429"), "\(refused)")
        #expect(refused.contains("MaxStreamsPerUser"), "\(refused)")
        // Only the holder's instance: the refused one was never launched.
        let running = try daemon.client.get("/v1/instances?all=1", as: [APIInstance].self)
        #expect(
            running.count == 1 && running.first?.arguments == ["ignore-term", "30"], "\(running)")

        holder.signal(SIGKILL)
        holder.waitUntilExit()
        var answered = ""
        #expect(
            try daemon.eventually {
                answered = try daemon.run("/usr/bin/setpriv", attach).output
                return answered.hasSuffix("200")
            }, "\(answered)")
        #expect(answered.contains("\"reason\":\"exited\""), "\(answered)")
        let launched = try daemon.client.get("/v1/instances?all=1", as: [APIInstance].self)
        #expect(
            launched.count == 2 && launched.allSatisfy { $0.launchedBy == 65534 }, "\(launched)")
    }
}
