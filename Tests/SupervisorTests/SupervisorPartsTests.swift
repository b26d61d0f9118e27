import AppdAPI
import AppdBase
import AppdConfig
import CLinux
import Foundation
import Glibc
import Testing

@testable import Supervisor

private func instance(
    _ id: String, app: AppID = "com.example.app", state: InstanceState = .active,
    by caller: UInt32 = 1000, startedAt: Date = Date(), service: Bool? = nil
) -> Instance {
    var entry = Instance(
        id: id, app: app, uid: 60_001, arguments: [], launchedBy: caller, startedAt: startedAt,
        log: "/logs/\(id).log", state: state)
    entry.service = service
    return entry
}

@Suite("the instance table: lookups, the cached listing, launches under way")
struct InstanceTableTests {
    @Test(
        "the listing is sorted by start, cached until an entry changes, and filtered by app in any case"
    )
    func listing() {
        var table = InstanceTable()
        let now = Date()
        table.entries["b"] = instance("b", app: "com.example.B", startedAt: now)
        table.entries["a"] = instance("a", startedAt: now.addingTimeInterval(-1))
        table.entries["x"] = instance("x", state: .exited, startedAt: now.addingTimeInterval(-2))
        let live = table.listed()
        let all = table.listed(includeExited: true)
        let ofB = table.listed(app: "COM.EXAMPLE.b")
        #expect(live.map(\.id) == ["a", "b"])
        #expect(all.map(\.id) == ["x", "a", "b"])
        #expect(ofB.map(\.id) == ["b"])
        let version = table.version
        _ = table.listed()
        #expect(table.version == version)
        table.entries["a"]?.state = .background
        #expect(table.version != version)
        let changed = table.listed()
        #expect(changed.first?.state == .background)
    }

    @Test("an unknown id is notFound; an exited one is not live")
    func lookups() throws {
        var table = InstanceTable()
        table.entries["x"] = instance("x", state: .exited)
        #expect(throws: AppdError.self) { try table.entry("nope") }
        #expect(try table.entry("X").id == "x")
        #expect(throws: AppdError.self) { try table.live("x", "kill") }
    }

    @Test("launches under way count as live for admission, and for an app's running")
    func launchesUnderWay() {
        var table = InstanceTable()
        table.entries["a"] = instance("a", app: "com.example.one", by: 1000)
        table.entries["z"] = instance("z", app: "com.example.one", state: .exited, by: 1000)
        table.launchStarted(app: "com.example.two", by: 1000)
        table.launchStarted(app: "com.example.one", by: 2000)
        let counts = table.liveCounts(app: "com.example.one", caller: 1000)
        #expect(counts.total == 3 && counts.own == 2 && counts.app == 2)
        #expect(table.appIsRunning("com.example.two"))
        // Without "a", one still runs: uid 2000's launch of it.
        #expect(table.appIsRunning("com.example.one", except: "a"))
        table.launchEnded(app: "com.example.two", by: 1000)
        #expect(!table.appIsRunning("com.example.two"))
        #expect(table.launches(of: "com.example.two") == 0)
        let after = table.liveCounts(app: "com.example.two", caller: 1000)
        #expect(after.total == 2 && after.own == 1 && after.app == 0)
    }

    @Test("an app's instances and launches count under every ASCII spelling of its id, no other")
    func appInAnyCase() {
        var table = InstanceTable()
        table.entries["a"] = instance("a", app: "com.Example.One")
        table.launchStarted(app: "COM.EXAMPLE.TWO", by: 1000)
        #expect(table.appIsRunning("com.example.one"))
        #expect(table.liveCounts(app: "COM.example.ONE", caller: 0).app == 1)
        #expect(table.launches(of: "com.example.two") == 1)
        table.launchEnded(app: "com.example.Two", by: 1000)
        #expect(!table.appIsRunning("COM.EXAMPLE.TWO"))
        // U+212A (Kelvin) lowercases to "k" in Unicode, not in the registry or here.
        table.entries["k"] = instance("k", app: "com.example.kit")
        #expect(!table.appIsRunning("com.example.\u{212A}it"))
        #expect(table.listed(app: "com.example.\u{212A}it").isEmpty)
    }
}

@Suite("the service keeper: KeepAlive's decisions")
struct ServiceKeeperTests {
    /// A keeper of one app, "svc", under `[Lifecycle]` settings with these KeepAlive values.
    struct Keeper {
        var keeper = ServiceKeeper()
        var settings = LifecycleSettings()

        init(limit: Int = 3, stable: Double = 10, delay: Double = 1) {
            settings.keepAliveLimit = limit
            settings.keepAliveStableTime = stable
            settings.keepAliveDelay = delay
        }

        mutating func ended(
            _ exit: APIExit, ran: Double = 1, mode: ServiceSettings.KeepAlive = .yes
        ) -> ServiceKeeper.Decision {
            keeper.ended("svc", exit: exit, ran: ran, mode: mode, lifecycle: settings)
        }

        mutating func due(_ generation: Int) -> Bool {
            keeper.due("svc", generation: generation)
        }

        var run: ServiceRun { keeper.run("svc") }
    }

    static let crash = APIExit(reason: .signaled, signal: 9)

    @Test("a crash is restarted with a doubling delay until KeepAliveLimit, then appd gives up")
    func backoffThenGiveUp() {
        var svc = Keeper(limit: 2)
        let first = svc.ended(Self.crash)
        let second = svc.ended(Self.crash)
        let third = svc.ended(Self.crash)
        #expect(first == .restart(attempt: 1, delay: 1, generation: 1))
        #expect(second == .restart(attempt: 2, delay: 2, generation: 2))
        #expect(third == .gaveUp(restarts: 2))
        #expect(svc.run.gaveUp)
        // A client's launch ends the crash loop.
        svc.keeper.clientLaunched("svc")
        #expect(!svc.run.gaveUp)
        #expect(svc.run.restarts == 0)
    }

    @Test("a run longer than KeepAliveStableTime starts the count again")
    func stableRunResets() {
        var svc = Keeper(limit: 1, stable: 10)
        let crash = APIExit(reason: .exited, code: 1)
        _ = svc.ended(crash)
        let short = svc.ended(crash)
        #expect(short == .gaveUp(restarts: 1))
        let long = svc.ended(crash, ran: 11)
        #expect(long == .restart(attempt: 1, delay: 1, generation: 2))
    }

    @Test("asked-for ends are never restarted; on-failure spares a clean exit")
    func notRestarted() {
        var svc = Keeper()
        for reason in [ExitReason.terminated, .killed, .killedAfterGrace] {
            let decision = svc.ended(APIExit(reason: reason))
            #expect(decision == .notRestarted)
        }
        let clean = APIExit(reason: .exited, code: 0)
        let onFailure = svc.ended(clean, mode: .onFailure)
        let always = svc.ended(clean, mode: .yes)
        #expect(onFailure == .notRestarted)
        #expect(always == .restart(attempt: 1, delay: 1, generation: 1))
    }

    @Test("only the last restart scheduled is due; a client's launch drops it")
    func generations() throws {
        var svc = Keeper(limit: 5)
        guard case .restart(_, _, let old) = svc.ended(Self.crash),
            case .restart(_, _, let last) = svc.ended(Self.crash)
        else {
            Issue.record("no restart scheduled")
            return
        }
        let oldDue = svc.due(old)
        let lastDue = svc.due(last)
        let again = svc.due(last)
        #expect(!oldDue)
        #expect(lastDue)
        #expect(!again)
        guard case .restart(_, _, let next) = svc.ended(Self.crash) else {
            Issue.record("no restart scheduled")
            return
        }
        svc.keeper.clientLaunched("svc")
        let dropped = svc.due(next)
        #expect(!dropped)
    }

    @Test("an app's run is one, whatever the case its id is given in")
    func anyCase() {
        var keeper = ServiceKeeper()
        let settings = LifecycleSettings()
        let decision = keeper.ended(
            "com.Example.Svc", exit: Self.crash, ran: 1, mode: .yes, lifecycle: settings)
        guard case .restart(_, _, let generation) = decision else {
            Issue.record("no restart scheduled")
            return
        }
        #expect(keeper.run("COM.EXAMPLE.SVC").restarts == 1)
        #expect(keeper.runs.count == 1)
        let due = keeper.due("com.example.svc", generation: generation)
        #expect(due)
        #expect(keeper.run("com.example.\u{212A}vc").restarts == 0)
    }
}

@Suite("jetsam's choice of victims")
struct JetsamVictimsTests {
    @Test(
        "suspended, then background and inactive by recency, then services; the active app only over its limit"
    )
    func order() {
        let now = Date()
        var settings = LifecycleSettings()
        settings.memoryBudget = 100
        settings.activeMemoryLimit = 30
        let live = [
            instance("active", state: .active, startedAt: now),
            instance(
                "service", state: .background, startedAt: now.addingTimeInterval(-100),
                service: true),
            instance("newBackground", state: .background, startedAt: now.addingTimeInterval(-10)),
            instance("oldInactive", state: .inactive, startedAt: now.addingTimeInterval(-20)),
            instance("suspended", state: .suspended, startedAt: now),
        ]
        let usage = Dictionary(uniqueKeysWithValues: live.map { ($0.id, Int64(40)) })
        // 200 of 100: every one but the last goes before 100 is met (200 → 160 → 120 → 80).
        let victims = Supervisor.jetsamVictims(
            live, usage: usage, settings: settings, pressure: nil, critical: false)
        #expect(victims.map(\.entry.id) == ["suspended", "oldInactive", "newBackground"])
        // Far over (200 of 10): services go, then the active app over ActiveMemoryLimit.
        settings.memoryBudget = 10
        let all = Supervisor.jetsamVictims(
            live, usage: usage, settings: settings, pressure: nil, critical: false)
        #expect(
            all.map(\.entry.id) == [
                "suspended", "oldInactive", "newBackground", "service", "active",
            ])
        #expect(all.last?.message.contains("over ActiveMemoryLimit") == true)
        #expect(all[3].message.contains("a service"))
    }

    @Test("pressure alone takes one instance per check")
    func pressureTakesOne() {
        var settings = LifecycleSettings()
        settings.memoryPressureCritical = 10
        let live = [instance("a", state: .background), instance("b", state: .suspended)]
        let victims = Supervisor.jetsamVictims(
            live, usage: ["a": 1, "b": 1], settings: settings,
            pressure: MemoryPressure(some10: 50, full10: 50), critical: true)
        #expect(victims.map(\.entry.id) == ["b"])
        #expect(victims.first?.message.contains("memory pressure full 50.0%") == true)
    }
}

@Suite("reaping a launcher through its pidfd")
struct PidfdReapTests {
    @Test("a running child is not reaped, an ended one is with its status, once; never blocks")
    func reap() throws {
        // Runs until killed (not `read`: the test runner's stdin may be at its end).
        let pid = try FakeSpawner.spawn(["/bin/sleep", "600"])
        let child = FakeChild(pid: pid)
        #expect(child.pidfd >= 0)
        var status: Int32 = -1
        #expect(appd_pidfd_reap(child.pidfd, &status) == 0)
        child.kill()
        let killed = child.reap()
        #expect(killed.result == 1)
        #expect(killed.status & 0x7f == SIGKILL)
        // Reaped: a second reap is ECHILD, and a signal goes nowhere (ESRCH), whoever has the
        // pid now.
        #expect(appd_pidfd_reap(child.pidfd, &status) == -1 && errno == ECHILD)
        #expect(appd_pidfd_kill(child.pidfd, SIGKILL) == -1 && errno == ESRCH)
    }

    @Test("an exit code comes back in waitpid's form")
    func exitCode() throws {
        let child = FakeChild(pid: try FakeSpawner.spawn(["/bin/sh", "-c", "exit 7"]))
        let exited = child.reap()
        #expect(exited.result == 1)
        #expect(exited.status == 7 << 8)
    }
}
