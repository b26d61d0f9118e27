import AppContainers
import AppdAPI
import AppdBase
import Foundation
import Glibc
import Testing

@testable import Supervisor

/// The Supervisor actor itself, without root and without appd-exec: its app catalog, its
/// spawner and its cgroups are fakes (SupervisorFakes.swift), its instances plain child
/// processes, its records and logs in a temporary folder. What the root-only DaemonTests prove
/// through the built daemon, these prove of the actor's own decisions.
@Suite("the Supervisor on fakes: launch", .serialized)
struct SupervisorLaunchTests {
    @Test(
        "a launch loads the app, starts its launcher with the arguments, records it and makes it active"
    )
    func launch() async throws {
        let daemon = try FakeDaemon()
        daemon.catalog.add("com.example.one")
        let instance = try await daemon.supervisor.launch(
            "com.example.one", arguments: ["--hello"], caller: 1000)
        #expect(instance.state == .active)
        #expect(instance.app == "com.example.one")
        #expect(instance.launchedBy == 1000)
        let launches = daemon.spawner.launches
        #expect(launches.count == 1)
        #expect(launches.first?.arguments == ["--hello"])
        #expect(launches.first?.instance == instance.id)
        #expect(instance.pid == launches.first?.pid)
        #expect(instance.cgroup == "/fake/apps/com.example.one/\(instance.id)")
        // The record a next daemon adopts, with the pid.
        let record = try String(
            contentsOfFile: "\(daemon.folder)/run/instances/\(instance.id).json", encoding: .utf8)
        #expect(record.contains("\"pid\""))
        await daemon.finish()
    }

    @Test(
        "an app is found by its id in any ASCII case, and only so: the Kelvin sign is not a k (AppID)"
    )
    func appIDCase() async throws {
        let daemon = try FakeDaemon()
        daemon.catalog.add("com.example.kit")
        let instance = try await daemon.supervisor.launch(
            "com.example.kit", arguments: [], caller: 1000)
        #expect(
            await daemon.supervisor.listed(app: "COM.Example.KIT").instances.map(\.id) == [
                instance.id
            ])
        #expect(await daemon.supervisor.instances(app: "com.example.kit").count == 1)
        // Foundation's caseInsensitiveCompare and lowercased() fold U+212A to "k"; the
        // registry's NOCASE does not, and neither may the Supervisor.
        #expect(await daemon.supervisor.listed(app: "com.example.\u{212A}it").instances.isEmpty)
        #expect(await daemon.supervisor.instances(app: "com.example.\u{212A}it").isEmpty)
        await daemon.finish()
    }

    @Test(
        "a bundle that fails its launch-time check is refused before anything is spawned or recorded"
    )
    func refusedBundle() async throws {
        let daemon = try FakeDaemon()
        daemon.catalog.add("com.example.tampered")
        daemon.catalog.refuse("com.example.tampered")
        await #expect(throws: AppdError.self) {
            _ = try await daemon.supervisor.launch(
                "com.example.tampered", arguments: [], caller: 1000)
        }
        #expect(daemon.spawner.launches.isEmpty)
        let records = try FileManager.default.contentsOfDirectory(
            atPath: "\(daemon.folder)/run/instances")
        #expect(records.isEmpty)
        #expect(await daemon.supervisor.instances(includeExited: true).isEmpty)
        await daemon.finish()
    }

    @Test("MaxInstancesPerApp refuses a user's launch past the cap; root is never refused")
    func perAppCap() async throws {
        let daemon = try FakeDaemon(config: "[Supervisor]\nMaxInstancesPerApp=1\n")
        daemon.catalog.add("com.example.capped")
        _ = try await daemon.supervisor.launch("com.example.capped", arguments: [], caller: 1000)
        do {
            _ = try await daemon.supervisor.launch(
                "com.example.capped", arguments: [], caller: 1000)
            Issue.record("a second launch past MaxInstancesPerApp=1 was admitted")
        } catch let error as AppdError {
            #expect(error.code == .tooManyRequests)
        }
        _ = try await daemon.supervisor.launch("com.example.capped", arguments: [], caller: 0)
        #expect(daemon.spawner.launches.count == 2)
        await daemon.finish()
    }

    @Test("an instance whose process ends is reaped: exited, with its code or signal")
    func exit() async throws {
        let daemon = try FakeDaemon()
        daemon.catalog.add("com.example.short")
        daemon.spawner.program.withLock { $0 = ["/bin/sh", "-c", "exit 3"] }
        let instance = try await daemon.supervisor.launch(
            "com.example.short", arguments: [], caller: 1000)
        let ended = try await exited(daemon.supervisor, instance.id)
        #expect(ended.state == .exited)
        #expect(ended.exit?.reason == .exited)
        #expect(ended.exit?.code == 3)
        #expect(daemon.driver[instance.id]?.log.contains("remove") == true)
        await daemon.finish()
    }
}

@Suite("the Supervisor on fakes: lifecycle (foreground, background, suspend, resume)", .serialized)
struct SupervisorLifecycleTests {
    @Test("background, then the grace period freezes it; resume thaws it and makes it active")
    func graceFreezesResumeThaws() async throws {
        // 5 s: long enough that it is not frozen at once even when a full CI run stalls the
        // test between two calls, and waited for with `soon`, which returns as it happens.
        let daemon = try FakeDaemon(config: "[Lifecycle]\nBackgroundGracePeriod=5\n")
        daemon.catalog.add("com.example.app")
        let supervisor = daemon.supervisor
        let instance = try await supervisor.launch("com.example.app", arguments: [], caller: 1000)
        let cgroup = try #require(daemon.driver[instance.id])
        #expect(try await supervisor.background(instance.id).state == .background)
        #expect(!cgroup.log.contains("freeze"))
        #expect(try await soon { try await supervisor.instance(instance.id).state == .suspended })
        #expect(cgroup.log == ["freeze"])
        #expect(try await supervisor.resume(instance.id).state == .active)
        #expect(cgroup.log == ["freeze", "thaw"])
        await daemon.finish()
    }

    @Test("suspend freezes at once; a service is never frozen and never made active")
    func suspendAndServices() async throws {
        let daemon = try FakeDaemon(config: "[Lifecycle]\nBackgroundGracePeriod=3600\n")
        daemon.catalog.add("com.example.app")
        daemon.catalog.add("com.example.service", info: AppLaunchInfo(backgroundOnly: true))
        let supervisor = daemon.supervisor
        let app = try await supervisor.launch("com.example.app", arguments: [], caller: 1000)
        let suspended = try await supervisor.suspend(app.id)
        #expect(suspended.state == .suspended)
        #expect(daemon.driver[app.id]?.log == ["freeze"])
        let service = try await supervisor.launch(
            "com.example.service", arguments: [], caller: 1000)
        #expect(service.state == .background)
        #expect(service.service == true)
        await #expect(throws: AppdError.self) { _ = try await supervisor.suspend(service.id) }
        await #expect(throws: AppdError.self) { _ = try await supervisor.activate(service.id) }
        #expect(daemon.driver[service.id]?.log == [])
        await daemon.finish()
    }

    @Test("ActivePolicy=single: activating one sends the active one to the background")
    func singleActive() async throws {
        let daemon = try FakeDaemon(
            config: "[Lifecycle]\nActivePolicy=single\nBackgroundGracePeriod=3600\n")
        daemon.catalog.add("com.example.first")
        daemon.catalog.add("com.example.second")
        let supervisor = daemon.supervisor
        let first = try await supervisor.launch("com.example.first", arguments: [], caller: 1000)
        let second = try await supervisor.launch("com.example.second", arguments: [], caller: 1000)
        #expect(second.state == .active)
        #expect(try await supervisor.instance(first.id).state == .background)
        _ = try await supervisor.activate(first.id)
        #expect(try await supervisor.instance(first.id).state == .active)
        #expect(try await supervisor.instance(second.id).state == .background)
        await daemon.finish()
    }

    @Test("terminate thaws a suspended instance first, then ends it: reason terminated")
    func terminateSuspended() async throws {
        let daemon = try FakeDaemon(config: "[Lifecycle]\nBackgroundGracePeriod=3600\n")
        daemon.catalog.add("com.example.app")
        let supervisor = daemon.supervisor
        let app = try await supervisor.launch("com.example.app", arguments: [], caller: 1000)
        _ = try await supervisor.suspend(app.id)
        _ = try await supervisor.terminate(app.id, grace: 5)
        let ended = try await exited(supervisor, app.id)
        #expect(ended.exit?.reason == .terminated)
        #expect(daemon.driver[app.id]?.log.prefix(2) == ["freeze", "thaw"])
        await daemon.finish()
    }
}

@Suite("the Supervisor on fakes: jetsam's order of victims", .serialized)
struct SupervisorJetsamTests {
    @Test(
        "over MemoryBudget: a warning first, then suspended, then least recently used background, until under budget"
    )
    func order() async throws {
        let daemon = try FakeDaemon(
            config:
                "[Lifecycle]\nMemoryBudget=100M\nBackgroundGracePeriod=3600\nMemoryPressureWarning=0\nMemoryPressureCritical=0\n"
        )
        let supervisor = daemon.supervisor
        for app in ["older", "newer", "frozen", "front"] {
            daemon.catalog.add("com.example.\(app)")
        }
        let older = try await supervisor.launch(
            "com.example.older", arguments: [], caller: 1000, background: true)
        let newer = try await supervisor.launch(
            "com.example.newer", arguments: [], caller: 1000, background: true)
        let frozen = try await supervisor.launch(
            "com.example.frozen", arguments: [], caller: 1000, background: true)
        _ = try await supervisor.suspend(frozen.id)
        let front = try await supervisor.launch("com.example.front", arguments: [], caller: 1000)
        for id in [older.id, newer.id, frozen.id, front.id] {
            daemon.driver[id]?.memoryBytes.withLock { $0 = 40 << 20 }
        }
        // 160 MiB of 100: the first check only warns.
        await supervisor.checkMemory(pressure: nil)
        #expect(await supervisor.runningCount() == 4)
        // The second kills: the suspended one, then the older background one (120 MiB left,
        // still over), then stops (80 MiB).
        await supervisor.checkMemory(pressure: nil)
        for id in [frozen.id, older.id] {
            let ended = try await exited(supervisor, id)
            #expect(ended.exit?.reason == .jetsam)
        }
        #expect(try await supervisor.instance(newer.id).state == .background)
        #expect(try await supervisor.instance(front.id).state == .active)
        let message = try await supervisor.instance(older.id).exit?.message ?? ""
        #expect(message.contains("least recently used"))
        await daemon.finish()
    }
}

@Suite("the Supervisor on fakes: services (KeepAlive)", .serialized)
struct SupervisorServiceTests {
    @Test("KeepAlive=yes: an instance that crashes is launched again, in the background, as root")
    func restartAfterCrash() async throws {
        // No grace-period freeze while it is checked: under a full CI run the restarted
        // instance was suspended (the default grace period passed) before the test looked.
        let daemon = try FakeDaemon(
            config:
                "[Lifecycle]\nKeepAliveDelay=0.05\nBackgroundGracePeriod=3600\n[App com.example.svc]\nKeepAlive=yes\n"
        )
        daemon.catalog.add("com.example.svc")
        let supervisor = daemon.supervisor
        let first = try await supervisor.launch("com.example.svc", arguments: [], caller: 1000)
        Glibc.kill(try #require(first.pid), SIGKILL)
        #expect(try await exited(supervisor, first.id).exit?.reason == .signaled)
        #expect(await soon { await supervisor.runningCount(app: "com.example.svc") == 1 })
        let second = try #require(await supervisor.instances(app: "com.example.svc").first)
        #expect(second.id != first.id)
        #expect(second.launchedBy == 0)
        #expect(second.state == .background)
        #expect(await supervisor.service("com.example.svc")?.restarts == 1)
        await daemon.finish()
    }

    @Test("KeepAlive is not a restart of what was asked to end: terminate stays ended")
    func terminateIsNotRestarted() async throws {
        let daemon = try FakeDaemon(
            config: "[Lifecycle]\nKeepAliveDelay=0.05\n[App com.example.svc]\nKeepAlive=yes\n")
        daemon.catalog.add("com.example.svc")
        let supervisor = daemon.supervisor
        let first = try await supervisor.launch("com.example.svc", arguments: [], caller: 1000)
        _ = try await supervisor.terminate(first.id, grace: 5)
        #expect(try await exited(supervisor, first.id).exit?.reason == .terminated)
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(await supervisor.runningCount(app: "com.example.svc") == 0)
        #expect(daemon.spawner.launches.count == 1)
        await daemon.finish()
    }

    @Test("a crash loop: KeepAliveLimit restarts in a row, each short, and appd gives up")
    func crashLoop() async throws {
        let daemon = try FakeDaemon(
            config:
                "[Lifecycle]\nKeepAliveDelay=0.05\nKeepAliveLimit=2\nKeepAliveStableTime=60\nBackgroundGracePeriod=3600\n[App com.example.svc]\nKeepAlive=yes\n"
        )
        daemon.catalog.add("com.example.svc")
        // Each run fails a moment after it starts, as a crashing service does. No grace-period
        // freeze: the fake's freeze does not stop the child, so a restart that a stalled full
        // CI run left in the background past the grace period was "suspended" when its child
        // exited, which a real frozen app cannot do, and the give-up never came.
        daemon.spawner.program.withLock { $0 = ["/bin/sh", "-c", "sleep 0.2; exit 1"] }
        let supervisor = daemon.supervisor
        _ = try await supervisor.launch("com.example.svc", arguments: [], caller: 1000)
        #expect(
            await soon(60) { await supervisor.service("com.example.svc")?.state == .crashLoop })
        // The first launch and KeepAliveLimit restarts, no more.
        #expect(daemon.spawner.launches.count == 3)
        await daemon.finish()
    }
}

@Suite("the Supervisor on fakes: the lifecycle channel, the test playing the app", .serialized)
struct SupervisorChannelTests {
    @Test(
        "hello, ready, background and a background task, as AppRuntime speaks them: each answer and state change in order"
    )
    func conversation() async throws {
        let daemon = try FakeDaemon(config: "[Lifecycle]\nBackgroundGracePeriod=3600\n")
        daemon.catalog.add("com.example.app")
        let supervisor = daemon.supervisor
        let instance = try await supervisor.launch(
            "com.example.app", arguments: ["--x"], caller: 1000)
        let app = try #require(daemon.spawner.launches.first).channel
        #expect(try await supervisor.instance(instance.id).channel == .silent)
        app.send(["type": "hello", "version": 1])
        let launched = try #require(await app.waitMessage())
        #expect(launched["type"] as? String == "didFinishLaunching")
        #expect(launched["instance"] as? String == instance.id)
        #expect(launched["arguments"] as? [String] == ["--x"])
        #expect(launched["state"] as? String == "inactive")
        #expect(try await soon { try await supervisor.instance(instance.id).channel == .launching })
        // Launched into the foreground: ready brings it the rest of the way.
        app.send(["type": "ready"])
        #expect(await app.waitTypes(until: "didBecomeActive") == ["didBecomeActive"])
        _ = try await supervisor.background(instance.id)
        var down: [[String: Any]] = []
        for _ in 0..<2 { if let message = await app.waitMessage() { down.append(message) } }
        #expect(down.map { $0["type"] as? String } == ["willResignActive", "didEnterBackground"])
        #expect(down.last?["gracePeriod"] as? Double == 3600)
        app.send(["type": "beginBackgroundTask", "name": "upload", "ref": 7])
        let began = try #require(await app.waitMessage())
        #expect(began["type"] as? String == "backgroundTaskBegan")
        #expect(began["ref"] as? Int == 7)
        #expect(began["task"] as? Int == 1)
        #expect(try await soon { try await supervisor.instance(instance.id).backgroundTasks == 1 })
        app.send(["type": "endBackgroundTask", "task": 1])
        #expect(try await soon { try await supervisor.instance(instance.id).backgroundTasks == 0 })
        await daemon.finish()
    }

    @Test("an app that says hello and never ready is ended by the launch watchdog")
    func watchdog() async throws {
        let daemon = try FakeDaemon(config: "[Lifecycle]\nLaunchWatchdog=0.3\n")
        daemon.catalog.add("com.example.app")
        let supervisor = daemon.supervisor
        let instance = try await supervisor.launch("com.example.app", arguments: [], caller: 1000)
        let app = try #require(daemon.spawner.launches.first).channel
        app.send(["type": "hello", "version": 1])
        #expect(await app.waitMessage()?["type"] as? String == "didFinishLaunching")
        let ended = try await exited(supervisor, instance.id)
        #expect(ended.exit?.reason == .launchWatchdog)
        #expect(daemon.driver[instance.id]?.log.contains("kill") == true)
        await daemon.finish()
    }

    @Test("a message that is not the protocol closes the channel: the app reads its end")
    func protocolError() async throws {
        let daemon = try FakeDaemon()
        daemon.catalog.add("com.example.app")
        let supervisor = daemon.supervisor
        let instance = try await supervisor.launch("com.example.app", arguments: [], caller: 1000)
        let app = try #require(daemon.spawner.launches.first).channel
        app.send(["type": "hello", "version": 1])
        #expect(await app.waitMessage()?["type"] as? String == "didFinishLaunching")
        let garbage = Array("not json".utf8)
        #expect(Glibc.send(app.fd, garbage, garbage.count, 0) == garbage.count)
        #expect(try await soon { try await supervisor.instance(instance.id).channel == .closed })
        #expect(await app.waitMessage(within: 10) == nil)
        #expect(try await supervisor.instance(instance.id).state == .active)
        await daemon.finish()
    }
}

@Suite("the Supervisor on fakes: a consistent backup", .serialized)
struct SupervisorBackupFreezeTests {
    @Test(
        "a backup freezes the app's instances; one that cannot be frozen thaws the others, and the error names the instance, with the cgroup's error as its cause"
    )
    func freezeFailure() async throws {
        let daemon = try FakeDaemon(config: "[Lifecycle]\nBackgroundGracePeriod=3600\n")
        daemon.catalog.add("com.example.app")
        let supervisor = daemon.supervisor
        let first = try await supervisor.launch("com.example.app", arguments: [], caller: 1000)
        let second = try await supervisor.launch(
            "com.example.app", arguments: [], caller: 1000, background: true)
        #expect(try await supervisor.freezeForBackup(["COM.example.app"]).count == 2)
        await supervisor.thawAfterBackup([first.id, second.id])
        let kernel = AppdError.system("write cgroup.freeze", errno: EBUSY)
        try #require(daemon.driver[second.id]).freezeFailure.withLock { $0 = kernel }
        do {
            _ = try await supervisor.freezeForBackup(["com.example.app"])
            Issue.record("a freeze that fails must refuse the backup")
        } catch let error as AppdError {
            #expect(error.code == .unsupported)
            #expect(error.message == "cannot freeze instance \(second.id) for a consistent backup")
            #expect(error.cause == kernel)
            #expect(error.hint == "take it with --live, or terminate the app first")
            #expect(error.oneLine.contains("(because: write cgroup.freeze: EBUSY"))
        }
        // Whatever was frozen before the failure is thawed again.
        let calls = try #require(daemon.driver[first.id]).log
        #expect(calls.filter { $0 == "thaw" }.count == calls.filter { $0 == "freeze" }.count)
        await daemon.finish()
    }
}

@Suite("the Supervisor on fakes: re-adoption by the next daemon", .serialized)
struct SupervisorAdoptionTests {
    @Test(
        "a daemon started after another adopts its running instance: same state, and controllable")
    func adoptRunning() async throws {
        let first = try FakeDaemon(config: "[Lifecycle]\nBackgroundGracePeriod=3600\n")
        first.catalog.add("com.example.app")
        let instance = try await first.supervisor.launch(
            "com.example.app", arguments: ["x"], caller: 1000, background: true)
        await first.supervisor.shutdown()
        let next = try FakeDaemon(
            config: "[Lifecycle]\nBackgroundGracePeriod=3600\n", folder: first.folder,
            driver: first.driver)
        next.catalog.add("com.example.app")
        let report = await next.supervisor.start()
        #expect(report.adopted == [instance.id])
        let adopted = try await next.supervisor.instance(instance.id)
        #expect(adopted.state == .background)
        #expect(adopted.pid == instance.pid)
        #expect(adopted.arguments == ["x"])
        _ = try await next.supervisor.kill(instance.id)
        let ended = try await exited(next.supervisor, instance.id)
        #expect(ended.exit?.reason == .killed)
        await first.finish(removing: false)
        await next.finish()
    }

    @Test(
        "an instance that ended while no daemon ran is closed, not adopted; a recycled pid is not it"
    )
    func endedWhileDown() async throws {
        let first = try FakeDaemon()
        first.catalog.add("com.example.app")
        let gone = try await first.supervisor.launch("com.example.app", arguments: [], caller: 1000)
        await first.supervisor.shutdown()
        await first.finish(removing: false)  // kills and reaps the child
        let next = try FakeDaemon(folder: first.folder, driver: first.driver)
        let report = await next.supervisor.start()
        #expect(report.adopted.isEmpty)
        #expect(report.ended == [gone.id])
        let closed = try await next.supervisor.instance(gone.id)
        #expect(closed.state == .exited)
        await next.finish()
    }
}

@Suite("the Supervisor on fakes: the cache reclaimer", .serialized)
struct SupervisorCacheReclaimTests {
    @Test(
        "reclaiming by hand empties every app not running, never launched first, then least recently launched"
    )
    func order() async throws {
        let daemon = try FakeDaemon()
        for app in ["old", "never", "recent", "running"] {
            daemon.catalog.add("com.example.\(app)")
        }
        let now = Date()
        try daemon.catalog.recordLaunch(of: "com.example.old", at: now.addingTimeInterval(-3600))
        try daemon.catalog.recordLaunch(of: "com.example.recent", at: now.addingTimeInterval(-60))
        let running = try await daemon.supervisor.launch(
            "com.example.running", arguments: [], caller: 1000)
        let answer = try await daemon.supervisor.reclaimCaches(app: nil, byHand: true)
        #expect(
            daemon.catalog.state.withLock { $0.emptiedCaches } == [
                "com.example.never", "com.example.old", "com.example.recent",
            ])
        #expect(answer.running == ["com.example.running"])
        #expect(
            answer.reclaimed.map(\.app) == [
                "com.example.never", "com.example.old", "com.example.recent",
            ])
        // By name, a running app is refused.
        await #expect(throws: AppdError.self) {
            _ = try await daemon.supervisor.reclaimCaches(app: AppID(running.app), byHand: true)
        }
        await daemon.finish()
    }
}
