import AppdAPI
import AppdBase
import AppdClient
import Foundation
import Testing

/// A TCP server app (the probe's `serve PORT`, with network.server) run as a service
/// (docs/lifecycle.md, "Services"), against a real daemon: what issue 25's newcomer needed.
@Suite("services: LSBackgroundOnly, RunAtLoad, KeepAlive, restart", .serialized, rootOnly)
struct ServiceTests {
    static let server = "<key>com.apple.security.network.server</key><true/>"
    static let backgroundOnly = "<key>LSBackgroundOnly</key><true/>"

    /// What the server answers one connection within `timeout` seconds (`pong N`), or nil:
    /// a frozen server's kernel accepts the connection, and nothing answers.
    static func ask(_ port: Int, timeout: Double = 1) -> String? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var wait = timeval(
            tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = read(fd, &buffer, buffer.count)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self).trimmingCharacters(in: .newlines)
    }

    /// SIGKILL to the app's own processes (the probe), not its launcher: a crash of the server.
    static func killApp(_ instance: APIInstance) throws {
        let cgroup = try #require(instance.cgroup)
        let pids = instanceProcesses(cgroup: cgroup)
        let apps = pids.filter { pid in
            (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.hasPrefix("Probe")
                == true
        }
        #expect(!apps.isEmpty, "no Probe process in \(cgroup): \(pids)")
        for pid in apps { kill(pid, SIGKILL) }
    }

    func services(_ daemon: TestDaemon) throws -> [APIService] {
        try daemon.client.get("/v1/services", as: [APIService].self)
    }

    func live(_ daemon: TestDaemon, _ app: String) throws -> [APIInstance] {
        try daemon.client.get("/v1/instances?app=\(app)", as: [APIInstance].self)
    }

    @Test(
        "a service keeps answering while three other apps launch; the same server with BackgroundModes= (appd override --no-background) is frozen and stops answering"
    )
    func neverFrozen() throws {
        // com.example.plain says LSBackgroundOnly too: the admin's override takes it away.
        let daemon = try TestDaemon(
            config: lifecycleConfig("[App com.example.plain]\nBackgroundModes=\n"))
        try daemon.installProbe(
            "com.example.server", info: Self.backgroundOnly, entitlements: Self.server)
        try daemon.installProbe(
            "com.example.plain", info: Self.backgroundOnly, entitlements: Self.server)
        try daemon.installProbe("com.example.other")
        let (port, plainPort) = (try freeLocalPort(), try freeLocalPort())
        let plain = try daemon.launch("com.example.plain", ["serve", "\(plainPort)"])
        #expect(plain.service == nil && plain.state == .active)
        let service = try daemon.launch("com.example.server", ["serve", "\(port)"])
        // Not the active app, and it left the active one where it was.
        #expect(service.service == true)
        #expect(service.state == .background)
        #expect(try daemon.state(plain.id) == .active)
        #expect(try daemon.eventually { Self.ask(port) == "pong 1" })
        #expect(try daemon.eventually { Self.ask(plainPort) != nil })

        for _ in 0..<3 { _ = try daemon.launch("com.example.other", ["sleep", "60"]) }
        // The ordinary server went to the background and is frozen after the 0.5 s grace
        // period: its kernel still accepts, nothing answers.
        #expect(try daemon.eventually { try daemon.state(plain.id) == .suspended })
        #expect(Self.ask(plainPort) == nil)
        // The service answers throughout, well past the grace period.
        let until = Date().addingTimeInterval(2)
        var answers = 0
        while Date() < until {
            if Self.ask(port) != nil { answers += 1 }
            usleep(100_000)
        }
        #expect(answers >= 10, "the service answered \(answers) times in 2 s")
        let now = try daemon.instance(service.id)
        #expect(now.state == .background, "\(now.state)")

        // Never the active app, never frozen by request either.
        #expect(throws: AppdError.self) { try daemon.act("activate", service.id) }
        #expect(throws: AppdError.self) { try daemon.act("suspend", service.id) }
        #expect(try daemon.state(service.id) == .background)
    }

    @Test(
        "a service still gets its lifecycle events: didEnterBackground without a grace period, willTerminate"
    )
    func lifecycleEvents() throws {
        let daemon = try TestDaemon(config: lifecycleConfig())
        try daemon.installProbe("com.example.daemonish", info: Self.backgroundOnly)
        let service = try daemon.launch("com.example.daemonish", ["lifecycle"])
        #expect(
            try daemon.eventually {
                try daemon.received(service.id) == ["didFinishLaunching", "didEnterBackground"]
            })
        let log = try daemon.logs(service.id)
        #expect(!log.contains("gracePeriod"), "\(log)")
        usleep(1_000_000)
        #expect(try daemon.state(service.id) == .background)
        _ = try daemon.act("terminate", service.id)
        _ = try daemon.wait(service.id)
        #expect(try daemon.received(service.id).last == "willTerminate")
    }

    @Test(
        "KeepAlive: kill -9 of the server restarts it after the backoff; a terminate does not; appctl restart restarts it once"
    )
    func keepAlive() throws {
        let port = try freeLocalPort()
        let daemon = try TestDaemon(
            config: lifecycleConfig(
                "KeepAliveDelay=0.5\n[App com.example.server]\nKeepAlive=yes\nArguments=serve \(port)\nEnvironment=GREETING=\"hello there\"\n"
            ))
        try daemon.installProbe(
            "com.example.server", info: Self.backgroundOnly, entitlements: Self.server)
        let watch = try EventWatch(daemon)
        // A launch that names no arguments gets Arguments=.
        let first = try daemon.client.post(
            "/v1/apps/com.example.server/launch", body: LaunchRequest(), as: APIInstance.self)
        #expect(first.arguments == ["serve", "\(port)"])
        #expect(try daemon.eventually { Self.ask(port) != nil })

        try Self.killApp(try daemon.instance(first.id))
        let crashed = try daemon.wait(first.id)
        #expect(crashed.exit?.reason == .signaled)
        let ended = Date()
        // Waiting: the next try is visible before it comes.
        let waiting = try #require(try services(daemon).first)
        #expect(waiting.state == .waiting || waiting.state == .running, "\(waiting)")
        #expect(try daemon.eventually { try live(daemon, "com.example.server").count == 1 })
        let second = try #require(try live(daemon, "com.example.server").first)
        #expect(second.id != first.id)
        #expect(
            second.startedAt.timeIntervalSince(ended) >= 0.4,
            "restarted \(second.startedAt.timeIntervalSince(ended)) s after the crash")
        #expect(second.launchedBy == 0)
        #expect(try daemon.eventually { Self.ask(port) == "pong 1" })
        let running = try #require(try services(daemon).first)
        #expect(
            running.state == .running && running.restarts == 1 && running.instances == [second.id],
            "\(running)")
        #expect(running.lastExit?.reason == .signaled)

        // appctl restart: terminated with the grace period, launched again with the same
        // arguments, once (KeepAlive does not restart an end appd asked for).
        let restarted = try daemon.run("appctl", ["restart", second.id, "--grace", "2"])
        #expect(restarted.code == 0, "\(restarted.output)")
        #expect(try daemon.instance(second.id).exit?.reason == .terminated)
        usleep(1_500_000)
        let third = try live(daemon, "com.example.server")
        #expect(third.count == 1, "\(third.map(\.id))")
        #expect(third.first?.arguments == ["serve", "\(port)"])
        #expect(restarted.output.contains(third.first?.id ?? "-"), "\(restarted.output)")
        #expect(try daemon.eventually { Self.ask(port) != nil })

        // A terminate ends it for good.
        let id = try #require(third.first?.id)
        _ = try daemon.act("terminate", id)
        _ = try daemon.wait(id)
        usleep(1_500_000)
        #expect(try live(daemon, "com.example.server").isEmpty)
        #expect(try services(daemon).first?.state == .stopped)
        let events = watch.stop { events in
            events.contains { $0.detail?.hasPrefix("KeepAlive=yes: not restarted") == true }
        }
        #expect(
            events.contains {
                $0.detail == "KeepAlive: restart 1 of 5 in 0.5 s (signaled, signal 9 (Killed))"
            },
            "\(events.compactMap(\.detail).filter { $0.contains("KeepAlive") })")
    }

    @Test(
        "a crash loop stops at KeepAliveLimit, with growing delays, and says so in ps, info and events"
    )
    func crashLoop() throws {
        let daemon = try TestDaemon(
            config: lifecycleConfig(
                "KeepAliveDelay=0.2\nKeepAliveLimit=3\n[App com.example.crasher]\nKeepAlive=on-failure\nArguments=exit 3\n"
            ))
        try daemon.installProbe("com.example.crasher", info: Self.backgroundOnly)
        let watch = try EventWatch(daemon)
        _ = try daemon.client.post(
            "/v1/apps/com.example.crasher/launch", body: LaunchRequest(), as: APIInstance.self)
        #expect(try daemon.eventually { try services(daemon).first?.state == .crashLoop })
        let service = try #require(try services(daemon).first)
        #expect(
            service.restarts == 3 && service.restartLimit == 3 && service.nextTry == nil,
            "\(service)")
        #expect(service.lastExit == APIExit(reason: .exited, code: 3))
        usleep(1_500_000)
        let all = try daemon.client.get(
            "/v1/instances?app=com.example.crasher&all=1", as: [APIInstance].self
        )
        .sorted { $0.startedAt < $1.startedAt }
        #expect(all.count == 4, "the first launch and 3 restarts, then nothing: \(all.count)")
        // Each wait doubles: 0.2, 0.4, 0.8 s between an end and the next start.
        let gaps = zip(all, all.dropFirst()).map {
            $1.startedAt.timeIntervalSince($0.endedAt ?? $0.startedAt)
        }
        #expect(gaps.count == 3 && gaps[0] >= 0.15 && gaps[1] >= 0.35 && gaps[2] >= 0.75, "\(gaps)")

        let ps = try daemon.run("appctl", ["ps"])
        #expect(
            ps.output.contains("com.example.crasher") && ps.output.contains("crash-loop")
                && ps.output.contains("3/3"), "\(ps.output)")
        let info = try daemon.run("appctl", ["info", "com.example.crasher"])
        #expect(
            info.output.contains("crash-loop: gave up after 3 restarts in a row"), "\(info.output)")
        let events = watch.stop { events in
            events.contains { $0.detail?.contains("crash loop") == true }
        }
        #expect(
            events.contains {
                $0.app == "com.example.crasher"
                    && $0.detail?.hasPrefix("KeepAlive: crash loop: gave up after 3 restarts")
                        == true
            })

        // A launch by hand ends the crash loop: counting starts again.
        _ = try daemon.client.post(
            "/v1/apps/com.example.crasher/launch", body: LaunchRequest(), as: APIInstance.self)
        #expect(try daemon.eventually { try services(daemon).first?.state != .crashLoop })
    }

    @Test(
        "RunAtLoad starts the service when appd starts; appd restarted re-adopts it and does not start it twice"
    )
    func runAtLoadAndReadoption() throws {
        let port = try freeLocalPort()
        let daemon = try TestDaemon(
            config: lifecycleConfig(
                "[App com.example.server]\nRunAtLoad=yes\nKeepAlive=yes\nArguments=serve \(port)\n")
        )
        try daemon.installProbe(
            "com.example.server", info: Self.backgroundOnly, entitlements: Self.server)
        // Installed after this daemon started: nothing ran it yet.
        #expect(try live(daemon, "com.example.server").isEmpty)
        #expect(try services(daemon).first?.state == .stopped)

        daemon.stop()
        try daemon.start()
        #expect(try daemon.eventually { try live(daemon, "com.example.server").count == 1 })
        let started = try #require(try live(daemon, "com.example.server").first)
        #expect(
            started.launchedBy == 0 && started.arguments == ["serve", "\(port)"]
                && started.service == true)
        #expect(try daemon.eventually { Self.ask(port) != nil })

        // A clean stop and a crash of appd: the same instance each time, adopted, never a second.
        daemon.stop()
        #expect(Self.ask(port) != nil)
        try daemon.start()
        usleep(1_000_000)
        #expect(try live(daemon, "com.example.server").map(\.id) == [started.id])
        daemon.crash()
        usleep(500_000)
        try daemon.start()
        usleep(1_000_000)
        #expect(try live(daemon, "com.example.server").map(\.id) == [started.id])
        #expect(try daemon.eventually { Self.ask(port) != nil })
        #expect(try services(daemon).first?.state == .running)
        // Not even a second one that ended at once (its port taken): one instance ever.
        let ever = try daemon.client.get(
            "/v1/instances?app=com.example.server&all=1", as: [APIInstance].self)
        #expect(
            ever.map(\.id) == [started.id],
            "\(ever.map { "\($0.id) \($0.state) \($0.exit?.description ?? "")" })")
    }

    @Test(
        "after an upgrade ps marks the instance outdated; appd install --restart restarts it on the new version"
    )
    func upgradeRestart() throws {
        let daemon = try TestDaemon(config: lifecycleConfig())
        try daemon.installProbe("com.example.server", info: Self.backgroundOnly)
        let old = try daemon.launch("com.example.server", ["sleep", "60"])
        #expect(old.version == "1" && old.outdated == nil)
        // Version 2 of the same bundle, made where version 1 was.
        try FileManager.default.removeItem(atPath: "\(daemon.directory)/src-com.example.server")
        let bundle = try daemon.makeProbe("com.example.server", info: Self.backgroundOnly)
        let plist = "\(bundle)/Info.plist"
        try String(contentsOfFile: plist, encoding: .utf8)
            .replacingOccurrences(
                of: "<key>CFBundleVersion</key><string>1</string>",
                with: "<key>CFBundleVersion</key><string>2</string>"
            )
            .write(toFile: plist, atomically: true, encoding: .utf8)
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
        let plainInstall = try daemon.run("appd", ["install", bundle])
        #expect(plainInstall.code == 0, "\(plainInstall.output)")
        #expect(try daemon.instance(old.id).outdated == true)
        let ps = try daemon.run("appctl", ["ps"])
        #expect(
            ps.output.contains("NOTE") && ps.output.contains("service, outdated (runs 1)"),
            "\(ps.output)")

        let upgrade = try daemon.run("appd", ["install", "--restart", bundle])
        #expect(upgrade.code == 0, "\(upgrade.output)")
        #expect(try daemon.instance(old.id).exit?.reason == .terminated)
        let now = try live(daemon, "com.example.server")
        #expect(
            now.count == 1 && now.first?.version == "2" && now.first?.outdated == nil
                && now.first?.arguments == ["sleep", "60"],
            "\(now)")
        #expect(
            upgrade.output.contains("Restarted as \(now.first?.id ?? "-")"), "\(upgrade.output)")
    }

    @Test("Environment= reaches the app; a name the sandbox sets is refused by reload, naming it")
    func environment() throws {
        let daemon = try TestDaemon(
            config: "[App com.example.env]\nEnvironment=GREETING=\"hello there\" LANG=de_DE.UTF-8\n"
        )
        try daemon.installProbe("com.example.env")
        let instance = try daemon.launch("com.example.env", ["env"])
        _ = try daemon.wait(instance.id)
        let log = try daemon.logs(instance.id)
        #expect(
            log.contains("GREETING=hello there") && log.contains("LANG=de_DE.UTF-8")
                && !log.contains("LANG=C.UTF-8"), "\(log)")

        let config = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
        try config.replacingOccurrences(
            of: "Environment=GREETING", with: "Environment=HOME=/ GREETING"
        )
        .write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        let reload = try daemon.run("appd", ["reload"])
        #expect(reload.code != 0)
        #expect(
            reload.output.contains("HOME is set by the sandbox and cannot be replaced"),
            "\(reload.output)")
    }

    @Test(
        "appd override writes the service keys, the daemon reloads them, a refused name leaves the file as it was"
    )
    func overrideCommand() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.echo", info: Self.backgroundOnly)
        let set = try daemon.run(
            "appd",
            [
                "override", "com.example.echo", "--config", daemon.configPath, "--memory-max",
                "64M",
                "--run-at-load", "yes", "--keep-alive", "on-failure", "--arguments",
                "serve 7000 'a b'",
                "--environment", "GREETING=hi",
            ])
        #expect(set.code == 0, "\(set.output)")
        #expect(set.output.contains("systemctl enable appd.service"), "\(set.output)")
        let file = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
        #expect(
            file.contains(
                "[App com.example.echo]\nMemoryMax=64M\nRunAtLoad=yes\nKeepAlive=on-failure\nArguments=serve 7000 'a b'\nEnvironment=GREETING=hi\n"
            ),
            "\(file)")
        let service = try #require(try services(daemon).first)
        #expect(
            service.app == "com.example.echo" && service.runAtLoad
                && service.keepAlive == "on-failure")
        #expect(service.arguments == ["serve", "7000", "a b"] && service.state == .stopped)

        let refused = try daemon.run(
            "appd",
            [
                "override", "com.example.echo", "--config", daemon.configPath, "--environment",
                "HOME=/",
            ])
        #expect(
            refused.code != 0 && refused.output.contains("HOME is set by the sandbox"),
            "\(refused.output)")
        #expect(try String(contentsOfFile: daemon.configPath, encoding: .utf8) == file)

        let removed = try daemon.run(
            "appd",
            [
                "override", "com.example.echo", "--config", daemon.configPath, "--run-at-load",
                "default",
                "--keep-alive", "default",
            ])
        #expect(removed.code == 0, "\(removed.output)")
        #expect(try services(daemon).isEmpty)
    }
}
