import AppdAPI
import AppdBase
import AppdClient
import Foundation
import Testing

@Suite("the daemon supervises instances", .serialized, rootOnly)
struct SupervisionTests {
    @Test(
        "a launch through the daemon runs the app in its sandbox; wait gives its exit code, logs its output"
    )
    func launchWaitLogs() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.exits")
        let instance = try daemon.launch("com.example.exits", ["exit", "7"])
        // Launched into the foreground: inactive, then the active app.
        #expect(instance.state == .active)
        #expect(instance.pid != nil)
        let done = try daemon.wait(instance.id)
        #expect(done.state == .exited)
        #expect(done.exit == APIExit(reason: .exited, code: 7))

        let env = try daemon.wait(try daemon.launch("com.example.exits", ["env"]).id)
        #expect(env.exit?.code == 0)
        let output = try daemon.logs(env.id)
        // The app's own uid and home, nothing of the daemon's environment.
        #expect(output.contains("env: value HOME=\(daemon.root)/Containers/Data/"))
        #expect(!output.contains("INVOCATION_ID"))
        #expect(
            output.contains("env: value USER=") || output.contains("env: value LOGNAME=")
                || output.contains("env: value HOME="))
    }

    @Test("appctl launch --console streams the output and exits with the app's code")
    func consoleLaunch() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.console")
        let result = try daemon.run(
            "appctl", ["launch", "--console", "com.example.console", "--", "exit", "3"])
        #expect(result.code == 3)
        let env = try daemon.run(
            "appctl", ["launch", "--console", "com.example.console", "--", "env"])
        #expect(env.code == 0)
        #expect(env.output.contains("env: value HOME="))
    }

    @Test(
        "terminate: SIGTERM ends a willing app within the grace period; one that ignores it is killed after"
    )
    func terminateWithGrace() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.term")
        let willing = try daemon.launch("com.example.term", ["sleep", "60"])
        let stubborn = try daemon.launch("com.example.term", ["ignore-term", "60"])
        // SIGTERM must be ignored before we send it.
        #expect(
            try daemon.eventually {
                try daemon.logs(stubborn.id).contains("ignore-term: value ready")
            })

        let started = Date()
        let asked = try daemon.client.post(
            "/v1/instances/\(willing.id)/terminate", body: TerminateRequest(grace: 5),
            as: APIInstance.self)
        #expect(asked.state == .terminating)
        let ended = try daemon.wait(willing.id)
        #expect(ended.exit == APIExit(reason: .terminated, signal: SIGTERM))
        #expect(Date().timeIntervalSince(started) < 4)

        let killStart = Date()
        _ = try daemon.client.post(
            "/v1/instances/\(stubborn.id)/terminate", body: TerminateRequest(grace: 1),
            as: APIInstance.self)
        let killed = try daemon.wait(stubborn.id)
        #expect(killed.exit?.reason == .killedAfterGrace)
        #expect(killed.exit?.signal == SIGKILL)
        #expect(Date().timeIntervalSince(killStart) >= 1)
        // Nothing is left of either: no process, no cgroup.
        for instance in [willing, stubborn] {
            if let cgroup = instance.cgroup {
                #expect(!FileManager.default.fileExists(atPath: cgroup))
            }
            if let pid = instance.pid { #expect(kill(pid, 0) != 0) }
        }
    }

    @Test("suspend freezes every process (no CPU used), resume thaws; kill ends it at once")
    func suspendResumeKill() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.spin")
        let instance = try daemon.launch("com.example.spin", ["spin", "60"])
        let cgroup = try #require(instance.cgroup)
        usleep(300_000)
        let suspended = try daemon.client.post(
            "/v1/instances/\(instance.id)/suspend", as: APIInstance.self)
        #expect(suspended.state == .suspended)
        let frozenAt = cpuTicks(cgroup: cgroup)
        usleep(1_000_000)
        // One tick of slack: a tick may be accounted right after the freeze.
        #expect(cpuTicks(cgroup: cgroup) - frozenAt <= 1)

        let resumed = try daemon.client.post(
            "/v1/instances/\(instance.id)/resume", as: APIInstance.self)
        #expect(resumed.state == .active)
        // It spins again: 30 ticks come within a second on an idle machine, later on a loaded one.
        let thawedAt = cpuTicks(cgroup: cgroup)
        #expect(daemon.eventually { cpuTicks(cgroup: cgroup) - thawedAt >= 30 })

        _ = try daemon.client.post("/v1/instances/\(instance.id)/kill", as: APIInstance.self)
        let killed = try daemon.wait(instance.id)
        #expect(killed.exit?.reason == .killed)
        // An exited instance cannot be controlled any more: 409 naming why.
        #expect(throws: AppdError.self) {
            try daemon.client.post("/v1/instances/\(instance.id)/suspend", as: APIInstance.self)
        }
    }

    @Test("an app over MemoryMax is ended by the OOM killer, and the exit reason says so")
    func outOfMemory() throws {
        let daemon = try TestDaemon(config: "[Sandbox]\nMemoryMax=32M\n")
        try daemon.installProbe("com.example.hungry")
        let instance = try daemon.launch("com.example.hungry", ["alloc", "256"])
        let ended = try daemon.wait(instance.id)
        #expect(ended.exit?.reason == .outOfMemory)
        #expect(ended.exit?.signal == SIGKILL)
        #expect(
            ended.exit?.message?.contains("its limit: MemoryMax=33554432 of [Sandbox]") == true,
            "\(ended.exit?.message ?? "")")
    }

    @Test("an OOM kill under an [App ID] MemoryMax= names that section, not [Sandbox]")
    func outOfMemoryOverride() throws {
        let daemon = try TestDaemon(
            config: "[Sandbox]\nMemoryMax=512M\n[App com.example.hungry]\nMemoryMax=32M\n")
        try daemon.installProbe("com.example.hungry")
        let instance = try daemon.launch("com.example.hungry", ["alloc", "256"])
        let ended = try daemon.wait(instance.id)
        #expect(ended.exit?.reason == .outOfMemory)
        #expect(
            ended.exit?.message?.contains("its limit: MemoryMax=32M of [App com.example.hungry]")
                == true, "\(ended.exit?.message ?? "")")
    }

    @Test(
        "a launch that cannot build its sandbox is recorded as failed-to-launch with the launcher's message"
    )
    func failedLaunch() throws {
        // A sandbox that cannot be built: the data container it binds is gone. (A missing
        // executable no longer gets that far: the launch check refuses it first, SigningTests.)
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.broken")
        let app = try daemon.client.get("/v1/apps/com.example.broken", as: APIApp.self)
        try FileManager.default.removeItem(atPath: app.dataContainer)
        let instance = try daemon.launch("com.example.broken", [])
        let ended = try daemon.wait(instance.id)
        #expect(ended.exit?.reason == .failedToLaunch)
        #expect(ended.exit?.message?.isEmpty == false)
    }

    @Test(
        "uninstalling an app with a running instance is refused with 409; after terminate it works")
    func uninstallWhileRunning() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.busy")
        let instance = try daemon.launch("com.example.busy", ["sleep", "60"])
        let refused = try daemon.run("appd", ["uninstall", "com.example.busy"])
        #expect(refused.code != 0)
        #expect(refused.output.contains("running instance"))
        _ = try daemon.client.post("/v1/instances/\(instance.id)/kill", as: APIInstance.self)
        _ = try daemon.wait(instance.id)
        #expect(try daemon.run("appd", ["uninstall", "com.example.busy"]).code == 0)
    }
}

@Suite("instance logs", .serialized, rootOnly)
struct LogTests {
    @Test(
        "an instance's log is rotated past LogMaxBytes: .log.1 keeps the newest part, logs serve both in order"
    )
    func rotation() throws {
        let daemon = try TestDaemon(config: "LogMaxBytes=16K\n")
        try daemon.installProbe("com.example.chatty")
        // 2,000 lines of 100 bytes: 200 KB, far over the limit, then 3 s asleep for the rotation.
        let instance = try daemon.launch("com.example.chatty", ["chatter", "2000"])
        #expect(
            try daemon.eventually { FileManager.default.fileExists(atPath: instance.log + ".1") }
        )
        _ = try daemon.wait(instance.id)
        var info = stat()
        #expect(stat(instance.log + ".1", &info) == 0)
        #expect(info.st_size <= 16 * 1024)
        let text = try daemon.logs(instance.id)
        // The newest lines are kept, the oldest gone, and what is served is in order.
        #expect(text.contains("chatter line 0001999"))
        #expect(!text.contains("chatter line 0000000"))
        let numbers = text.split(separator: "\n").compactMap {
            $0.split(separator: " ").dropFirst(2).first.flatMap { Int($0) }
        }
        #expect(numbers == numbers.sorted())
    }
}
