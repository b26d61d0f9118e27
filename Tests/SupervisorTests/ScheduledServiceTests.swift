import AppdAPI
import AppdBase
import AppdConfig
import Foundation
import Testing

@testable import Supervisor

/// ServiceSchedule's decisions, pure: the next run by interval and by calendar, a missed run
/// running once, the records following appd.conf.
@Suite("scheduled services: the decisions")
struct ServiceScheduleTests {
    let app = AppID("com.example.report")
    let start = Date(timeIntervalSince1970: 1_796_206_830)

    func settings(_ text: String) throws -> ServiceSettings {
        let config = try AppdConfiguration.parse(
            "[App com.example.report]\n\(text)\n", file: "appd.conf")
        return try #require(config.override(for: app)).service
    }

    @Test("StartInterval: one interval after the last run, or after it was first scheduled")
    func interval() throws {
        let every = try settings("StartInterval=600")
        var schedule = ServiceSchedule()
        let added = schedule.reconcile([app: every], now: start)
        #expect(added)
        #expect(schedule.due([app: every], now: start.addingTimeInterval(599)).isEmpty)
        #expect(schedule.due([app: every], now: start.addingTimeInterval(600)) == [app])
        schedule.ran(app, now: start.addingTimeInterval(600))
        #expect(schedule.nextRun([app: every]) == start.addingTimeInterval(1200))
        // Taken out of appd.conf: forgotten.
        let removed = schedule.reconcile([:], now: start)
        #expect(removed)
        #expect(schedule.runs.isEmpty)
    }

    @Test("a calendar run missed while appd was down is due once, and the next counts from it")
    func missedOnce() throws {
        let daily = try settings("StartCalendarInterval=daily")
        // Last ran three days ago: three runs missed, one is due.
        let schedule = ServiceSchedule(runs: [
            app: ScheduledRun(
                since: start.addingTimeInterval(-10 * 86400),
                last: start.addingTimeInterval(-3 * 86400))
        ])
        #expect(schedule.due([app: daily], now: start) == [app])
        var after = schedule
        after.ran(app, now: start)
        #expect(after.due([app: daily], now: start.addingTimeInterval(60)).isEmpty)
        #expect((after.nextRun([app: daily]) ?? .distantPast) > start)
        let read = try #require(ServiceSchedule.decoded(try after.encoded()))
        #expect(read == after)
    }
}

/// The Supervisor on fakes: a scheduled service launched on time, and a missed run at start.
@Suite("scheduled services: the Supervisor on fakes", .serialized)
struct ScheduledServiceOnFakesTests {
    @Test("StartInterval launches the app on time, as appd (uid 0), into the background")
    func onTime() async throws {
        let daemon = try FakeDaemon(
            config: "[App com.example.report]\nStartInterval=1\nArguments=--report\n")
        daemon.catalog.add("com.example.report")
        _ = await daemon.supervisor.start()
        #expect(daemon.spawner.launches.isEmpty)
        #expect(try await soon { daemon.spawner.launches.count == 1 })
        let instance = try #require(
            await daemon.supervisor.instances(app: AppID("com.example.report")).first)
        #expect(instance.launchedBy == 0 && instance.arguments == ["--report"])
        #expect(instance.state == .background)
        let service = try #require(await daemon.supervisor.service(AppID("com.example.report")))
        #expect(service.lastRun != nil && service.nextRun != nil)
        await daemon.finish()
    }

    @Test(
        "a calendar service missed while the daemon was down runs once at start, not once per miss")
    func missedWhileDown() async throws {
        let daemon = try FakeDaemon(
            config: "[App com.example.report]\nStartCalendarInterval=hourly\n")
        daemon.catalog.add("com.example.report")
        let now = Date()
        let left = ServiceSchedule(runs: [
            AppID("com.example.report"): ScheduledRun(
                since: now.addingTimeInterval(-86400), last: now.addingTimeInterval(-5 * 3600))
        ])
        try left.encoded().write(to: URL(fileURLWithPath: "\(daemon.folder)/service-runs.json"))
        _ = await daemon.supervisor.start()
        #expect(try await soon { daemon.spawner.launches.count == 1 })
        try await Task.sleep(nanoseconds: 500_000_000)
        #expect(daemon.spawner.launches.count == 1)
        let kept = try #require(
            ServiceSchedule.decoded(
                try Data(contentsOf: URL(fileURLWithPath: "\(daemon.folder)/service-runs.json"))))
        let last = try #require(kept.runs[AppID("com.example.report")]?.last)
        #expect(last > now.addingTimeInterval(-60))
        await daemon.finish()
    }
}
