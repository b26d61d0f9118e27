import AppdAPI
import AppdBase
import Foundation
import Glibc
import Testing

@testable import Supervisor

/// FetchScheduler's decisions, pure: the admin's bound, misses lengthening the interval, the
/// batch window, the schedule as persisted.
@Suite("background fetch: the schedule's decisions")
struct FetchSchedulerTests {
    let app = AppID("com.example.app")
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    @Test("an app asking for less than the admin's bound gets the bound; never drops it")
    func bound() {
        var scheduler = FetchScheduler()
        let plan = scheduler.request(app, seconds: 1, bound: 60, now: start)
        #expect(plan?.next == start.addingTimeInterval(60))
        // The same wake kept: a relaunch never postpones it.
        #expect(
            scheduler.request(app, seconds: 7200, bound: 60, now: start)?.next
                == start.addingTimeInterval(60))
        #expect(scheduler.request(app, seconds: nil, bound: 60, now: start) == nil)
        #expect(scheduler.plan(app) == nil && scheduler.nextWake == nil)
    }

    @Test("each miss doubles the interval, at most 16 times; an answer brings it back")
    func misses() {
        var scheduler = FetchScheduler()
        _ = scheduler.request(app, seconds: 100, bound: 60, now: start)
        #expect(scheduler.missed(app, bound: 60, now: start) == 200)
        #expect(scheduler.missed(app, bound: 60, now: start) == 400)
        for _ in 0..<10 { _ = scheduler.missed(app, bound: 60, now: start) }
        #expect(scheduler.missed(app, bound: 60, now: start) == 1600)
        scheduler.answered(app, .noData, bound: 60, now: start)
        #expect(scheduler.plan(app)?.misses == 0)
        #expect(scheduler.plan(app)?.next == start.addingTimeInterval(100))
        #expect(scheduler.plan(app)?.lastResult == "noData")
    }

    @Test("apps due within the batch window are woken together; one far off waits")
    func batching() {
        var scheduler = FetchScheduler()
        let other = AppID("com.example.other")
        let far = AppID("com.example.far")
        _ = scheduler.request(app, seconds: 600, bound: 60, now: start)
        _ = scheduler.request(other, seconds: 605, bound: 60, now: start)
        _ = scheduler.request(far, seconds: 900, bound: 60, now: start)
        let now = start.addingTimeInterval(600)
        #expect(scheduler.due(now: now.addingTimeInterval(-1), bound: { _ in 60 }).isEmpty)
        #expect(scheduler.due(now: now, bound: { _ in 60 }) == [app, other])
        scheduler.deferred([app, other], now: now)
        #expect(scheduler.plan(app)?.next == now.addingTimeInterval(FetchScheduler.pressureDelay))
    }

    @Test("the schedule written is the schedule read; another version is not read")
    func persisted() throws {
        var scheduler = FetchScheduler()
        _ = scheduler.request(app, seconds: 900, bound: 60, now: start)
        _ = scheduler.missed(app, bound: 60, now: start)
        let read = try #require(FetchScheduler.decoded(try scheduler.encoded()))
        #expect(read == scheduler)
        #expect(FetchScheduler.decoded(Data(#"{"version":9,"apps":{}}"#.utf8)) == nil)
    }
}

/// The Supervisor on fakes, the test playing the app over its channel: woken from suspended,
/// frozen again after its answer or its deadline.
@Suite("background fetch: the Supervisor on fakes", .serialized)
struct BackgroundFetchOnFakesTests {
    static let config = """
        [Lifecycle]
        BackgroundGracePeriod=3600
        MinimumFetchInterval=0.5
        FetchDeadline=1
        """

    /// An instance that said hello and ready and asked for fetches every `interval`, then
    /// suspended.
    func suspendedFetching(_ daemon: FakeDaemon, interval: Double = 0.5) async throws -> (
        APIInstance, FakeApp
    ) {
        daemon.catalog.add("com.example.app")
        let supervisor = daemon.supervisor
        let instance = try await supervisor.launch(
            "com.example.app", arguments: [], caller: 1000, background: true)
        let app = try #require(daemon.spawner.launches.first).channel
        app.send(["type": "hello", "version": 1])
        app.send(["type": "ready"])
        #expect(await app.waitTypes(until: "didEnterBackground").last == "didEnterBackground")
        // Before it suspends: an answer out of turn is ignored, not a protocol error.
        app.send(["type": "fetchCompleted", "fetch": 1, "result": "newData"])
        app.send(["type": "setMinimumBackgroundFetchInterval", "interval": interval])
        #expect(try await soon { try await supervisor.instance(instance.id).nextFetch != nil })
        _ = try await supervisor.suspend(instance.id)
        return (instance, app)
    }

    @Test("a suspended app is thawed for performFetch and frozen again when it answers")
    func answered() async throws {
        let daemon = try FakeDaemon(config: Self.config)
        let supervisor = daemon.supervisor
        let (instance, app) = try await suspendedFetching(daemon)
        let cgroup = try #require(daemon.driver[instance.id])
        let fetch = try #require(await app.waitMessage(within: 30))
        #expect(fetch["type"] as? String == "performFetch")
        #expect(fetch["timeRemaining"] as? Double == 1)
        #expect(try await supervisor.instance(instance.id).state == .background)
        #expect(cgroup.log.suffix(2) == ["freeze", "thaw"])
        let number = try #require(fetch["fetch"] as? Int)
        app.send(["type": "fetchCompleted", "fetch": number, "result": "newData"])
        #expect(try await soon { try await supervisor.instance(instance.id).state == .suspended })
        #expect(cgroup.log.suffix(3) == ["freeze", "thaw", "freeze"])
        let plan = try #require(await supervisor.fetches.scheduler.plan(AppID("com.example.app")))
        #expect(plan.lastResult == "newData" && plan.misses == 0)
        #expect(daemon.supervisor.fetchCounts.perApp()[AppID("com.example.app")]?["newData"] == 1)
        #expect(try await supervisor.instance(instance.id).channel == .ready)
        await daemon.finish()
    }

    @Test("an app that never answers is frozen at the deadline, and woken less often")
    func deadline() async throws {
        let daemon = try FakeDaemon(config: Self.config)
        let supervisor = daemon.supervisor
        let (instance, app) = try await suspendedFetching(daemon)
        #expect(await app.waitMessage(within: 30)?["type"] as? String == "performFetch")
        #expect(try await supervisor.instance(instance.id).state == .background)
        #expect(try await soon { try await supervisor.instance(instance.id).state == .suspended })
        let plan = try #require(await supervisor.fetches.scheduler.plan(AppID("com.example.app")))
        #expect(plan.misses == 1 && plan.lastResult == "missed")
        #expect(FetchScheduler.interval(plan, bound: 0.5) == 1)
        // The late answer finds no fetch in hand: ignored, the app stays frozen.
        app.send(["type": "fetchCompleted", "fetch": 1, "result": "noData"])
        try await Task.sleep(nanoseconds: 200_000_000)
        #expect(try await supervisor.instance(instance.id).state == .suspended)
        #expect(daemon.supervisor.fetchCounts.perApp()[AppID("com.example.app")]?["missed"] == 1)
        await daemon.finish()
    }

    @Test("the schedule survives a daemon restart: the next daemon knows the next fetch")
    func restart() async throws {
        let first = try FakeDaemon(
            config: "[Lifecycle]\nBackgroundGracePeriod=3600\nMinimumFetchInterval=3600\n")
        first.catalog.add("com.example.app")
        let instance = try await first.supervisor.launch(
            "com.example.app", arguments: [], caller: 1000, background: true)
        let app = try #require(first.spawner.launches.first).channel
        app.send(["type": "hello", "version": 1])
        app.send(["type": "ready"])
        app.send(["type": "setMinimumBackgroundFetchInterval", "interval": 60])
        #expect(
            try await soon { try await first.supervisor.instance(instance.id).nextFetch != nil })
        let next = try #require(try await first.supervisor.instance(instance.id).nextFetch)
        await first.supervisor.shutdown()
        let second = try FakeDaemon(
            config: "[Lifecycle]\nBackgroundGracePeriod=3600\n", folder: first.folder,
            driver: first.driver)
        second.catalog.add("com.example.app")
        _ = await second.supervisor.start()
        let adopted = try await second.supervisor.instance(instance.id)
        #expect(abs((adopted.nextFetch ?? .distantPast).timeIntervalSince(next)) < 1)
        await first.finish(removing: false)
        await second.finish()
    }
}
