import AppdBase
import AppdConfig
import Foundation

/// What appd remembers of an app it starts on a schedule (`StartInterval=`,
/// `StartCalendarInterval=`), in the state root's `service-runs.json`: its last scheduled run,
/// and since when it has been scheduled (the base of its first run).
struct ScheduledRun: Codable, Equatable, Sendable {
    var since: Date
    var last: Date?
}

/// The decisions of scheduled services (docs/lifecycle.md, "Scheduled services"), pure: when
/// each app runs next, which runs are due, and a run missed while no daemon ran (or the machine
/// was off) running once at the next start, as a systemd timer with `Persistent=true`. The
/// actor launches or wakes the app (Supervisor+Schedule.swift).
struct ServiceSchedule: Equatable, Sendable {
    var runs: [AppID: ScheduledRun] = [:]
    static let version = 1

    /// The next run of an app scheduled by `settings` whose record is `run`: one interval after
    /// the last run (or since it was scheduled), or the calendar's next time after it. A time
    /// in the past is a run missed: due at once, once.
    static func next(_ settings: ServiceSettings, _ run: ScheduledRun) -> Date? {
        let base = run.last ?? run.since
        let byInterval = settings.startInterval.map { base.addingTimeInterval($0) }
        let byCalendar = settings.startCalendar?.next(after: base)
        switch (byInterval, byCalendar) {
        case (let a?, let b?): return min(a, b)
        case (let a?, nil): return a
        case (nil, let b?): return b
        case (nil, nil): return nil
        }
    }

    /// Brings the records in line with the scheduled apps of `apps` (an app scheduled for the
    /// first time starts counting at `now`; one no longer scheduled is forgotten). True if
    /// anything changed.
    mutating func reconcile(_ apps: [AppID: ServiceSettings], now: Date) -> Bool {
        let before = runs
        runs = runs.filter { apps[$0.key]?.isScheduled == true }
        for (app, settings) in apps where settings.isScheduled && runs[app] == nil {
            runs[app] = ScheduledRun(since: now)
        }
        return runs != before
    }

    /// The scheduled apps whose next run is at or before `now`, sorted.
    func due(_ apps: [AppID: ServiceSettings], now: Date) -> [AppID] {
        runs.compactMap { app, run in
            guard let settings = apps[app], let next = Self.next(settings, run), next <= now
            else { return nil }
            return app
        }.sorted()
    }

    /// The earliest next run of any app.
    func nextRun(_ apps: [AppID: ServiceSettings]) -> Date? {
        runs.compactMap { app, run in apps[app].flatMap { Self.next($0, run) } }.min()
    }

    /// `app` ran (or was found running) at `now`: its next run counts from here, so however
    /// many runs were missed, one runs.
    mutating func ran(_ app: AppID, now: Date) {
        runs[app]?.last = now
    }

    // MARK: Persisted

    private struct File: Codable {
        var version: Int
        var apps: [String: ScheduledRun]
    }

    func encoded() throws -> Data {
        var apps: [String: ScheduledRun] = [:]
        for (app, run) in runs { apps[app.spelling] = run }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(File(version: Self.version, apps: apps))
    }

    static func decoded(_ data: Data) -> ServiceSchedule? {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        guard let file = try? decoder.decode(File.self, from: data), file.version == version else {
            return nil
        }
        var runs: [AppID: ScheduledRun] = [:]
        for (app, run) in file.apps { runs[AppID(app)] = run }
        return ServiceSchedule(runs: runs)
    }
}
