import AppdAPI
import Foundation
import Testing

/// `appd override`: the admin's per-app narrowing written into appd.conf, reloaded by the
/// daemon, shown by `appd profile` and `appctl info`, enforced on the app's instances.
@Suite("appd override: per-app overrides through the real daemon", .serialized, rootOnly)
struct OverrideCommandTests {
    static let networkClient = "<key>com.apple.security.network.client</key><true/>"
    /// A comment and a key of the admin's that every edit must leave as they are.
    static let adminLines = "# the admin's own comment\n[Lifecycle]\nBackgroundGracePeriod=7\n"

    @Test(
        "an override is written into appd.conf, shown by appd profile and appctl info, and enforced at the next launch: memory.max, pids.max, cpu weight, the denied entitlement"
    )
    func enforcedAtLaunch() throws {
        // Its port allowed on the loopback: only the revoked entitlement refuses the connect.
        let listener = try HostListener()
        let daemon = try TestDaemon(
            config: Self.adminLines + "[Sandbox]\nLoopbackPorts=\(listener.port)\n")
        try daemon.installProbe("com.example.narrowed", entitlements: Self.networkClient)

        let result = try daemon.run(
            "appd",
            [
                "override", "com.example.narrowed", "--config", daemon.configPath, "--memory-max",
                "64M", "--tasks-max", "40", "--cpu-weight", "50", "--deny",
                "com.apple.security.network.client",
            ])
        #expect(result.code == 0, "\(result.output)")
        #expect(
            result.output.contains(
                "[App com.example.narrowed] in \(daemon.configPath): MemoryMax=64M, TasksMax=40, CPUWeight=50, RevokeEntitlements=com.apple.security.network.client"
            ), "\(result.output)")
        #expect(result.output.contains("appd reloaded it"), "\(result.output)")

        // The file: the section is there, the admin's lines untouched.
        let text = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
        #expect(text.contains(Self.adminLines), "\(text)")
        #expect(
            text.contains(
                "[App com.example.narrowed]\nMemoryMax=64M\nTasksMax=40\nCPUWeight=50\nRevokeEntitlements=com.apple.security.network.client\n"
            ), "\(text)")

        // Launched after it: its cgroup has the limits, and its network is its own.
        let sleeper = try daemon.launch("com.example.narrowed", ["sleep", "60"])
        let pid = try #require(sleeper.pid)
        #expect(daemon.eventually { ReloadTests.memoryLimit(of: pid) == 64 << 20 })
        #expect(Self.cgroupValue(of: pid, controller: "pids", file: "pids.max") == "40")
        #expect(Self.cpuWeight(of: pid) == 50)
        let refused = try daemon.launch(
            "com.example.narrowed", ["connect", "127.0.0.1", "\(listener.port)"])
        _ = try daemon.wait(refused.id)
        let log = try daemon.logs(refused.id)
        #expect(log.contains("connect: refused"), "\(log)")

        // Shown where an admin looks.
        let profile = try daemon.run(
            "appd", ["profile", "--config", daemon.configPath, "com.example.narrowed"])
        #expect(
            profile.output.contains(
                "override  [App com.example.narrowed] in appd.conf: MemoryMax=64M, TasksMax=40, CPUWeight=50, revoked com.apple.security.network.client"
            ), "\(profile.output)")
        #expect(profile.output.contains("memory 64M, tasks 40, cpu weight 50"), "\(profile.output)")
        #expect(profile.output.split(separator: "\n").count <= 12, "\(profile.output)")
        let info = try daemon.run("appctl", ["info", "com.example.narrowed"])
        #expect(
            info.output.contains(
                "override    MemoryMax=64M, TasksMax=40, CPUWeight=50, revoked com.apple.security.network.client"
            ), "\(info.output)")
        let json = try daemon.run("appctl", ["info", "--json", "com.example.narrowed"])
        let app = try APICoding.decoder().decode(APIApp.self, from: Data(json.output.utf8))
        #expect(app.adminOverride?["MemoryMax"] == "64M")

        // --reset: the section goes, the admin's lines stay, the next launch has the host's limits.
        let reset = try daemon.run(
            "appd", ["override", "com.example.narrowed", "--config", daemon.configPath, "--reset"])
        #expect(reset.code == 0, "\(reset.output)")
        let after = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
        #expect(
            !after.contains("[App com.example.narrowed]") && after.contains(Self.adminLines),
            "\(after)")
        let plain = try daemon.launch("com.example.narrowed", ["sleep", "60"])
        #expect(daemon.eventually { ReloadTests.memoryLimit(of: plain.pid ?? 0) == 512 << 20 })
    }

    @Test("a changed limit goes at once onto the app's running instances, and only that app's")
    func liveLimits() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.live")
        try daemon.installProbe("com.example.other")
        let live = try daemon.launch("com.example.live", ["sleep", "60"])
        let other = try daemon.launch("com.example.other", ["sleep", "60"])
        let livePid = try #require(live.pid)
        let otherPid = try #require(other.pid)
        #expect(daemon.eventually { ReloadTests.memoryLimit(of: livePid) == 512 << 20 })

        let result = try daemon.run(
            "appd",
            [
                "override", "com.example.live", "--config", daemon.configPath, "--memory-max",
                "48M",
                "--tasks-max", "30", "--json",
            ])
        #expect(result.code == 0, "\(result.output)")
        #expect(result.output.contains("\"reloaded\" : true"), "\(result.output)")
        #expect(
            result.output.contains("com.example.live \(live.id): memory 50331648, tasks 30"),
            "\(result.output)")
        #expect(ReloadTests.memoryLimit(of: livePid) == 48 << 20)
        #expect(Self.cgroupValue(of: livePid, controller: "pids", file: "pids.max") == "30")
        #expect(ReloadTests.memoryLimit(of: otherPid) == 512 << 20)
        #expect(try daemon.instance(live.id).state.isRunning)
    }

    @Test(
        "never widens: --allow of an entitlement the signer never granted changes nothing, and the app still lacks it"
    )
    func neverWidens() throws {
        // Its port allowed on the loopback: only the missing entitlement refuses the connect.
        let listener = try HostListener()
        let daemon = try TestDaemon(config: "[Sandbox]\nLoopbackPorts=\(listener.port)\n")
        try daemon.installProbe("com.example.offline")  // no network entitlement
        let before = try String(contentsOfFile: daemon.configPath, encoding: .utf8)

        let allow = try daemon.run(
            "appd",
            [
                "override", "com.example.offline", "--config", daemon.configPath, "--allow",
                "com.apple.security.network.client",
            ])
        #expect(allow.code == 0, "\(allow.output)")
        #expect(
            allow.output.contains("was not denied: --allow only removes a --deny"),
            "\(allow.output)")
        #expect(try String(contentsOfFile: daemon.configPath, encoding: .utf8) == before)

        // --deny then --allow: the deny goes, and nothing more than the signer's grant remains.
        _ = try daemon.run(
            "appd",
            [
                "override", "com.example.offline", "--config", daemon.configPath, "--deny",
                "com.apple.security.network.client", "--memory-max", "100M",
            ])
        let undo = try daemon.run(
            "appd",
            [
                "override", "com.example.offline", "--config", daemon.configPath, "--allow",
                "com.apple.security.network.client",
            ])
        #expect(undo.output.contains("RevokeEntitlements removed"), "\(undo.output)")
        let json = try daemon.run(
            "appd", ["profile", "--json", "--config", daemon.configPath, "com.example.offline"])
        #expect(!json.output.contains("com.apple.security.network.client"), "\(json.output)")
        #expect(
            json.output.contains("\"net\""), "still a network namespace of its own: \(json.output)")
        let attempt = try daemon.launch(
            "com.example.offline", ["connect", "127.0.0.1", "\(listener.port)"])
        _ = try daemon.wait(attempt.id)
        let log = try daemon.logs(attempt.id)
        #expect(log.contains("connect: refused"), "\(log)")
    }

    @Test(
        "bad input: a broken file is left as it is, bad values and ids are named, nothing is written"
    )
    func refusals() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.x")
        let good = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
        for (arguments, words) in [
            (["--memory-max", "lots"], "--memory-max lots is not a size of at least 16M"),
            (["--cpu-weight", "0"], "--cpu-weight 0 is not a weight from 1 to 10000"),
            (["--background-modes", "audio teleport"], "--background-modes audio teleport is not"),
            (["--deny", "com.*.x"], "--deny com.*.x is not an entitlement key or pattern"),
            (["--reset", "--memory-max", "1G"], "--reset removes the whole section"),
        ] {
            let result = try daemon.run(
                "appd", ["override", "com.example.x", "--config", daemon.configPath] + arguments)
            #expect(
                result.code != 0 && result.output.contains(words), "\(arguments): \(result.output)")
            #expect(try String(contentsOfFile: daemon.configPath, encoding: .utf8) == good)
        }
        let badID = try daemon.run(
            "appd", ["override", "not an id", "--config", daemon.configPath, "--memory-max", "1G"])
        #expect(badID.code == 1, "\(badID.output)")

        // A file with an error is refused untouched, naming the line.
        let broken = good + "[Sandbox]\nMemoryMax=lots\n"
        try broken.write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        let refused = try daemon.run(
            "appd",
            ["override", "com.example.x", "--config", daemon.configPath, "--memory-max", "1G"])
        #expect(
            refused.code == 1 && refused.output.contains("has an error, so it is left as it is")
                && refused.output.contains("\(daemon.configPath):"), "\(refused.output)")
        #expect(try String(contentsOfFile: daemon.configPath, encoding: .utf8) == broken)

        // An id that is not installed: written, with a warning.
        try good.write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        let missing = try daemon.run(
            "appd",
            ["override", "com.example.absent", "--config", daemon.configPath, "--tasks-max", "64"])
        #expect(
            missing.code == 0 && missing.output.contains("is not installed"), "\(missing.output)")
    }

    @Test(
        "--no-background takes the app's allowed UIBackgroundModes away at its next launch; --data-quota is the app's own limit in its profile"
    )
    func backgroundModesAndQuota() throws {
        let daemon = try TestDaemon()
        let audio = "<key>UIBackgroundModes</key><array><string>audio</string></array>"
        try daemon.installProbe("com.example.player", info: audio)
        let before = try daemon.launch("com.example.player", ["sleep", "60"])
        #expect(try daemon.instance(before.id).backgroundModes == ["audio"])

        let result = try daemon.run(
            "appd",
            [
                "override", "com.example.player", "--config", daemon.configPath, "--no-background",
                "--data-quota", "32M",
            ])
        #expect(result.code == 0, "\(result.output)")
        // The running instance keeps what it launched with; the next one has none.
        #expect(try daemon.instance(before.id).backgroundModes == ["audio"])
        let after = try daemon.launch("com.example.player", ["sleep", "60"])
        #expect(try daemon.instance(after.id).backgroundModes ?? [] == [])

        // Narrowing to a mode the app has keeps it; one it lacks grants nothing.
        _ = try daemon.run(
            "appd",
            [
                "override", "com.example.player", "--config", daemon.configPath,
                "--background-modes", "audio voip",
            ])
        let narrowed = try daemon.launch("com.example.player", ["sleep", "60"])
        #expect(try daemon.instance(narrowed.id).backgroundModes == ["audio"])

        let profile = try daemon.run(
            "appd", ["profile", "--config", daemon.configPath, "com.example.player"])
        #expect(profile.output.contains("data container: 32M"), "\(profile.output)")
    }

    /// A v1 controller's file of `pid`'s cgroup, or the v2 one.
    static func cgroupValue(of pid: pid_t, controller: String, file: String) -> String? {
        let lines = instanceCgroupLines(of: pid)
        for line in lines {
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, parts[1].split(separator: ",").contains(Substring(controller))
            else { continue }
            let directory = parts[1].contains(",") ? String(parts[1]) : controller
            return
                (try? String(
                    contentsOfFile: "/sys/fs/cgroup/\(directory)\(parts[2])/\(file)",
                    encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        for line in lines where line.hasPrefix("0::") {
            return
                (try? String(
                    contentsOfFile: "/sys/fs/cgroup\(line.dropFirst(3))/\(file)", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return nil
    }

    /// cpu.weight on v2, or v1's cpu.shares turned back into a weight.
    static func cpuWeight(of pid: pid_t) -> Int? {
        if let shares = cgroupValue(of: pid, controller: "cpu", file: "cpu.shares").flatMap({
            Int($0)
        }) {
            return shares * 100 / 1024
        }
        return cgroupValue(of: pid, controller: "cpu", file: "cpu.weight").flatMap { Int($0) }
    }
}
