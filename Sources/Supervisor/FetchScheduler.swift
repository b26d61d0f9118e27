import AppdBase
import Foundation
import LifecycleProtocol

/// One app's background fetch schedule (docs/lifecycle.md, "Background fetch"), as persisted
/// in the state root's `fetch-schedule.json`: what the app asked for, when it is next woken,
/// the fetches it missed in a row, and how the last one went.
struct FetchPlan: Codable, Equatable, Sendable {
    /// The seconds the app asked for in setMinimumBackgroundFetchInterval, before the admin's
    /// bound (`MinimumFetchInterval`) is applied.
    var requested: Double
    var next: Date
    /// Fetches in a row the app did not answer within `FetchDeadline`: each doubles its
    /// interval (at most `FetchScheduler.maxMissFactor` times).
    var misses = 0
    var lastFetch: Date?
    /// newData, noData, failed, or `missed`.
    var lastResult: String?
}

/// The background fetch decisions for every app (pure: the actor wakes, tells and freezes, as
/// it does on LifecycleController's and ServiceKeeper's): the interval an app gets within the
/// admin's bound, who is due now (several apps due within a short window are woken together,
/// so the machine wakes once for them), what an answer and a missed deadline do to the next
/// wake, and the schedule as it is persisted across a daemon restart.
struct FetchScheduler: Equatable, Sendable {
    private(set) var plans: [AppID: FetchPlan] = [:]

    /// A miss doubles the interval, up to this factor (iOS wakes an app that never finishes
    /// its fetches less and less often).
    static let maxMissFactor = 16.0
    /// An app whose next wake is at most this far off (and at most a tenth of its interval)
    /// is woken with the apps due now.
    static let batchWindow = 10.0
    /// Under memory pressure the due wakes wait this long, then are looked at again.
    static let pressureDelay = 15.0
    /// The version of `fetch-schedule.json`.
    static let version = 1

    init(plans: [AppID: FetchPlan] = [:]) { self.plans = plans }

    func plan(_ app: AppID) -> FetchPlan? { plans[app] }

    /// The interval `plan` gets: what the app asked for, at least `bound` (the admin's), twice
    /// as long for each fetch missed in a row (at most `maxMissFactor` times).
    static func interval(_ plan: FetchPlan, bound: Double) -> Double {
        let factor = min(pow(2, Double(min(max(plan.misses, 0), 30))), maxMissFactor)
        return max(plan.requested, bound) * factor
    }

    /// setMinimumBackgroundFetchInterval: `seconds` nil ("never") drops the app's schedule.
    /// A new or shorter interval brings the next wake in; the same one asked again (at each
    /// launch, as apps do) keeps it, so relaunching never postpones a fetch.
    mutating func request(_ app: AppID, seconds: Double?, bound: Double, now: Date) -> FetchPlan? {
        guard let seconds else {
            plans[app] = nil
            return nil
        }
        var plan = plans[app] ?? FetchPlan(requested: seconds, next: .distantFuture)
        plan.requested = seconds
        let next = now.addingTimeInterval(Self.interval(plan, bound: bound))
        plan.next = min(plan.next, next)
        plans[app] = plan
        return plan
    }

    /// The earliest wake of any app.
    var nextWake: Date? { plans.values.map(\.next).min() }

    /// The apps to wake at `now`: every one due, and, when any is, those due within the batch
    /// window (`bound` gives each app's admin bound). Sorted for a stable order.
    func due(now: Date, bound: (AppID) -> Double) -> [AppID] {
        guard let first = nextWake, first <= now else { return [] }
        return plans.filter { app, plan in
            let window = min(Self.batchWindow, Self.interval(plan, bound: bound(app)) / 10)
            return plan.next.timeIntervalSince(now) <= window
        }.keys.sorted()
    }

    /// The app answered: misses start again at 0; the next wake is one interval from now.
    mutating func answered(_ app: AppID, _ result: FetchResult, bound: Double, now: Date) {
        guard var plan = plans[app] else { return }
        plan.misses = 0
        plan.lastFetch = now
        plan.lastResult = result.rawValue
        plan.next = now.addingTimeInterval(Self.interval(plan, bound: bound))
        plans[app] = plan
    }

    /// No answer within the deadline: one more miss, a longer interval. Returns the interval.
    mutating func missed(_ app: AppID, bound: Double, now: Date) -> Double? {
        guard var plan = plans[app] else { return nil }
        plan.misses = min(plan.misses + 1, 30)
        plan.lastFetch = now
        plan.lastResult = "missed"
        let interval = Self.interval(plan, bound: bound)
        plan.next = now.addingTimeInterval(interval)
        plans[app] = plan
        return interval
    }

    /// Woken now (the answer sets the next wake again), or due but not woken (no suspended
    /// instance that speaks the channel): tried again one interval later, no miss counted.
    mutating func postponed(_ app: AppID, bound: Double, now: Date) {
        guard var plan = plans[app] else { return }
        plan.next = now.addingTimeInterval(Self.interval(plan, bound: bound))
        plans[app] = plan
    }

    /// Under memory pressure: the due wakes move `pressureDelay` later.
    mutating func deferred(_ apps: [AppID], now: Date) {
        for app in apps { plans[app]?.next = now.addingTimeInterval(Self.pressureDelay) }
    }

    // MARK: Persisted

    private struct File: Codable {
        var version: Int
        var apps: [String: FetchPlan]
    }

    /// The schedule as `fetch-schedule.json` holds it.
    func encoded() throws -> Data {
        var apps: [String: FetchPlan] = [:]
        for (app, plan) in plans { apps[app.spelling] = plan }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(File(version: Self.version, apps: apps))
    }

    /// Reads a schedule written by `encoded`; nil for a file of another version or not one.
    static func decoded(_ data: Data) -> FetchScheduler? {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        guard let file = try? decoder.decode(File.self, from: data), file.version == version else {
            return nil
        }
        var plans: [AppID: FetchPlan] = [:]
        for (app, plan) in file.apps where plan.requested.isFinite && plan.requested >= 0 {
            plans[AppID(app)] = plan
        }
        return FetchScheduler(plans: plans)
    }
}
