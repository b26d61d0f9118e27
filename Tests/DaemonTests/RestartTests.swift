import AppdAPI
import AppdClient
import Foundation
import Testing

@Suite("restarting the daemon loses nothing", .serialized, rootOnly)
struct RestartTests {
    @Test(
        "5 apps running, the daemon SIGKILLed and started again: ps shows all 5, terminate works, exit codes are right"
    )
    func crashAndReadopt() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.survivor")
        var ids: [String] = []
        for _ in 0..<5 {
            ids.append(try daemon.launch("com.example.survivor", ["sleep", "120"]).id)
        }
        // One more that ends while no daemon runs: its launcher writes the status down.
        let brief = try daemon.launch("com.example.survivor", ["ignore-term", "2"]).id
        #expect(try daemon.eventually { try daemon.logs(brief).contains("ready") })

        // The launchers hold nothing of the daemon (no socket, no pipe of its parent): stdin,
        // the log on stdout/stderr, the status file, the report pipe it shares with its own
        // child (PID 1 of the app's namespace), and /dev/null, opened before it gave up its
        // privileges (it points 1 and 2 there once the app has ended).
        let launcher = try #require(try daemon.instance(ids[0]).pid)
        let fds = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(launcher)/fd")
            .compactMap(Int.init).sorted()
        #expect(fds == [0, 1, 2, 3, 4, 5])
        #expect(
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(launcher)/fd/4"))
                == "/dev/null")
        let report = try FileManager.default.destinationOfSymbolicLink(
            atPath: "/proc/\(launcher)/fd/3")
        let link = { (pid: String, fd: String) in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"))
                ?? ""
        }
        let descriptors = { (pid: String) in
            ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []).sorted
            { Int($0) ?? 0 < Int($1) ?? 0 }
        }
        let children = try String(
            contentsOfFile: "/proc/\(launcher)/task/\(launcher)/children", encoding: .utf8
        )
        .split(separator: " ").map(String.init)
        // Its children: PID 1 of the app's namespace, which shares the report pipe, and the
        // output relay (docs/app-output.md), which holds /dev/null on 0-2, the pipe's read end,
        // the log folder and its lock (a memfd of its own), and nothing else.
        #expect(children.count == 2, "\(children)")
        #expect(
            children.contains { pid in descriptors(pid).contains { link(pid, $0) == report } },
            "no child of the launcher holds its report pipe (\(report))")
        let relay = try #require(
            children.first { pid in descriptors(pid).count == 6 && link(pid, "0") == "/dev/null" })
        let relayLinks = descriptors(relay).map { link(relay, $0) }
        #expect(
            Array(relayLinks.prefix(3)) == ["/dev/null", "/dev/null", "/dev/null"], "\(relayLinks)")
        #expect(relayLinks.contains { $0.hasPrefix("pipe:") }, "\(relayLinks)")
        #expect(relayLinks.contains { $0.hasSuffix("/logs/com.example.survivor") }, "\(relayLinks)")
        #expect(relayLinks.contains { $0.hasPrefix("/memfd:appd-output-lock") }, "\(relayLinks)")
        #expect(
            try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(launcher)/fd/5")
                .hasSuffix(".status"))

        daemon.crash()
        usleep(2_500_000)
        try daemon.start()

        let live = try daemon.client.get("/v1/instances", as: [APIInstance].self)
        #expect(Set(live.map(\.id)) == Set(ids), "\(daemon.serveLog)")
        // Each launch made the new one active and sent the one before to the background, where
        // it may have been frozen meanwhile.
        #expect(live.allSatisfy { $0.state.isRunning || $0.state == .suspended })
        let ended = try daemon.instance(brief)
        #expect(ended.state == .exited)
        #expect(ended.exit == APIExit(reason: .exited, code: 0))

        // Terminate and kill work on adopted instances (not children of this daemon).
        for id in ids.prefix(4) {
            _ = try daemon.client.post(
                "/v1/instances/\(id)/terminate", body: TerminateRequest(grace: 5),
                as: APIInstance.self)
            #expect(try daemon.wait(id).exit == APIExit(reason: .terminated, signal: SIGTERM))
        }
        _ = try daemon.client.post("/v1/instances/\(ids[4])/kill", as: APIInstance.self)
        #expect(try daemon.wait(ids[4]).exit?.reason == .killed)
        #expect(try daemon.client.get("/v1/instances", as: [APIInstance].self).isEmpty)
    }

    @Test("a clean stop leaves the apps running for the next start")
    func cleanStop() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.stay")
        let instance = try daemon.launch("com.example.stay", ["sleep", "120"])
        daemon.stop()
        let pid = try #require(instance.pid)
        #expect(kill(pid, 0) == 0)
        try daemon.start()
        #expect(try daemon.instance(instance.id).state == .active)
    }

    @Test(
        "an app in the background when appd stopped is frozen once its grace period passes after the restart"
    )
    func adoptedBackgroundIsFrozen() throws {
        let daemon = try TestDaemon(config: "[Lifecycle]\nBackgroundGracePeriod=3\n")
        try daemon.installProbe("com.example.later")
        let instance = try daemon.launch("com.example.later", ["sleep", "120"])
        #expect(try daemon.act("background", instance.id).state == .background)
        daemon.stop()
        try daemon.start()
        #expect(try daemon.instance(instance.id).state == .background)
        // Adopted, its grace period starts again: frozen 3 s on. Before the fix its start was
        // lost and the instance stayed in the background for good.
        #expect(daemon.eventually { (try? daemon.instance(instance.id).state) == .suspended })
    }

    @Test("events: a subscriber sees launched and exited, with the exit")
    func events() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.events")
        let box = EventBox()
        let client = daemon.client
        let reader = Thread {
            try? client.streamLines("/v1/events") { line in
                if let event = try? APICoding.decoder().decode(APIEvent.self, from: line) {
                    box.append(event)
                }
                if box.count >= 3 { throw CancellationError() }
            }
        }
        reader.start()
        usleep(300_000)
        let instance = try daemon.launch("com.example.events", ["exit", "4"])
        #expect(daemon.eventually { box.count >= 3 })
        let events = box.events.filter { $0.instance == instance.id }
        #expect(events.map(\.kind) == [.launched, .state, .exited])
        #expect(events.map(\.state) == [.inactive, .active, .exited])
        #expect(events.last?.exit == APIExit(reason: .exited, code: 4))
    }
}

final class EventBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [APIEvent] = []
    func append(_ event: APIEvent) { lock.withLock { stored.append(event) } }
    var events: [APIEvent] { lock.withLock { stored } }
    var count: Int { lock.withLock { stored.count } }
}

@Suite("socket activation", .serialized, rootOnly)
struct SocketActivationTests {
    @Test(
        "appd serve adopts the listening socket systemd passes (LISTEN_FDS), started on the first connection"
    )
    func adoptsPassedSocket() throws {
        let directory = "/var/tmp/appd-activation-test-\(getpid())"
        try FileManager.default.createDirectory(
            atPath: "\(directory)/root", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = "\(directory)/activation.sock"
        // Its cgroup parent goes where the other daemon tests' go, not the host's /appd.
        try "[Supervisor]\nCgroupParent=/appd-daemon-tests/activation-\(getpid())\n"
            .write(toFile: "\(directory)/appd.conf", atomically: true, encoding: .utf8)
        defer {
            for hierarchy in DaemonProcess.cgroupHierarchies {
                let shared = "\(hierarchy)/appd-daemon-tests"
                rmdir("\(shared)/activation-\(getpid())")
                rmdir(shared)
            }
        }
        let activator = try ChildProcess(
            "/usr/bin/systemd-socket-activate",
            [
                "-l", socket, builtExecutable("appd"), "serve", "--root", "\(directory)/root",
                "--config", "\(directory)/appd.conf",
            ], stdout: .inherit, stderr: .discard)
        defer {
            activator.signal(SIGTERM)
            activator.waitUntilExit()
        }
        #expect(TestDaemon.eventuallyExists(socket))
        // The first connection starts appd, which answers on the very socket it was handed.
        let info = try AppdClient(socketPath: socket, timeout: 20).get(
            "/v1/version", as: APIDaemonInfo.self)
        #expect(info.stateRoot == "\(directory)/root")
        #expect(info.pid == activator.processIdentifier)  // systemd-socket-activate execs appd
        // It did not create a socket of its own.
        #expect(!FileManager.default.fileExists(atPath: "\(directory)/root/run/appd.sock"))
    }
}

extension TestDaemon {
    static func eventuallyExists(_ path: String) -> Bool {
        for _ in 0..<100 where !FileManager.default.fileExists(atPath: path) { usleep(50_000) }
        return FileManager.default.fileExists(atPath: path)
    }
}

@Suite("the app list", .serialized, rootOnly)
struct AppListTests {
    @Test(
        "GET /v1/apps follows every change of the registry, the daemon's own and one made in-process beside it"
    )
    func listFollowsRegistry() throws {
        let daemon = try TestDaemon()
        #expect(try daemon.client.get("/v1/apps", as: [APIApp].self).isEmpty)
        try daemon.installProbe("com.example.first")
        #expect(
            try daemon.client.get("/v1/apps", as: [APIApp].self).map(\.bundleId) == [
                "com.example.first"
            ])
        try daemon.installProbe("com.example.second")
        #expect(try daemon.client.get("/v1/apps", as: [APIApp].self).count == 2)
        // Behind the daemon's back: the list must not be a stale copy.
        #expect(
            try daemon.run("appd", ["uninstall", "--no-daemon", "com.example.first"]).code == 0)
        #expect(
            try daemon.client.get("/v1/apps", as: [APIApp].self).map(\.bundleId) == [
                "com.example.second"
            ])
    }
}
