import AppdAPI
import AppdBase
import AppdConfig
import Foundation
import Glibc
import LifecycleProtocol
import Synchronization

/// The background fetch the supervisor has in hand: the schedule (FetchScheduler), the last
/// fetch number handed out, and the one timer that wakes it.
struct FetchState {
    var scheduler = FetchScheduler()
    var lastNumber = 0
    /// A timer whose number is no longer this one does nothing.
    var timer = 0
    /// A write of `fetch-schedule.json` is waiting (writes are coalesced, one a second at most,
    /// so an app that changes its interval at its message rate costs one write a second).
    var writePending = false
}

/// The fetch an instance was woken for and has not answered.
struct PendingFetch {
    var number: Int
    var startedAt: Date
}

/// Background fetches per app since the daemon started, by result (`woken`, `newData`,
/// `noData`, `failed`, `missed`, `deferred`): read by the metrics when scraped.
public final class FetchCounts: Sendable {
    public static let results = ["woken", "newData", "noData", "failed", "missed", "deferred"]
    private let counts = Mutex<[AppID: [String: Int]]>([:])

    init() {}

    /// App → result → count.
    public func perApp() -> [AppID: [String: Int]] { counts.withLock { $0 } }

    func record(_ app: AppID, _ result: String) {
        counts.withLock { $0[app, default: [:]][result, default: 0] += 1 }
    }
}

/// Background fetch (docs/lifecycle.md, "Background fetch"): an app asks for a minimum
/// interval; when it is due and the app is suspended, appd thaws it, sends performFetch, and
/// freezes it again when it answers or when `FetchDeadline` passes (then its interval
/// lengthens). The decisions are FetchScheduler's; this is where they are carried out.
extension Supervisor {
    var fetchSchedulePath: String { "\(stateRoot)/fetch-schedule.json" }

    /// The admin's bound on `app`'s interval: `[App ID] MinimumFetchInterval=`, or
    /// `[Lifecycle]`'s.
    func fetchBound(_ app: AppID) -> Double {
        let override = configuration.current.override(for: app) ?? AppOverride()
        return override.fetchBound(lifecycle)
    }

    /// The schedule the previous daemon left (`start()`).
    func loadFetchSchedule() {
        if let data = FileManager.default.contents(atPath: fetchSchedulePath),
            let scheduler = FetchScheduler.decoded(data)
        {
            fetches.scheduler = scheduler
        }
        fetchScheduleChanged()
    }

    /// Written to a temporary name and renamed (a crash leaves the old schedule or the new).
    func writeFetchSchedule() {
        fetches.writePending = false
        guard let data = try? fetches.scheduler.encoded() else { return }
        try? data.write(to: URL(fileURLWithPath: fetchSchedulePath), options: .atomic)
    }

    func fetchScheduleChanged() {
        scheduleFetchTimer()
        for var entry in table.entries.values where entry.state != .exited {
            let next = nextFetch(entry.app)
            guard entry.nextFetch != next else { continue }
            entry.nextFetch = next
            save(entry)
        }
        guard !fetches.writePending else { return }
        fetches.writePending = true
        Task {
            try? await Task.sleep(nanoseconds: 1_000_000_000)
            if self.fetches.writePending { self.writeFetchSchedule() }
        }
    }

    /// The app's next background fetch, for the API (`APIInstance.nextFetch`).
    func nextFetch(_ app: AppID) -> Date? { fetches.scheduler.plan(app)?.next }

    // MARK: The app asks

    /// setMinimumBackgroundFetchInterval: published and saved only when the schedule changed,
    /// so an app that repeats itself costs nothing but the parse.
    func setFetchInterval(_ entry: Instance, seconds: Double?) {
        let before = fetches.scheduler.plan(entry.app)
        let bound = fetchBound(entry.app)
        let plan = fetches.scheduler.request(entry.app, seconds: seconds, bound: bound, now: Date())
        guard plan != before else { return }
        let detail: String
        if let plan {
            let interval = FetchScheduler.interval(plan, bound: bound)
            detail =
                "background fetch: every \(Self.seconds(interval))"
                + (interval > plan.requested && plan.misses == 0
                    ? " (asked \(Self.seconds(plan.requested)); MinimumFetchInterval=\(Self.seconds(bound)))"
                    : "")
        } else {
            detail = "background fetch: never"
        }
        publish(.message, entry.api, detail: "<- setMinimumBackgroundFetchInterval; \(detail)")
        fetchScheduleChanged()
    }

    // MARK: The timer

    /// Sleeps until the earliest wake (a day at most, then looks again).
    func scheduleFetchTimer() {
        fetches.timer &+= 1
        guard let next = fetches.scheduler.nextWake, !stopping else { return }
        let generation = fetches.timer
        let delay = min(max(0, next.timeIntervalSinceNow), 86400)
        Task {
            try? await Task.sleep(nanoseconds: UInt64(delay * 1e9))
            self.fetchTimerFired(generation)
        }
    }

    /// Memory is short: a trigger fired lately, apps were warned, or PSI `some` is at the
    /// warning level now. Wakes wait (they would only add to it).
    var memoryShortForFetch: Bool {
        if jetsam.warned || jetsam.episodeUntil > Date() { return true }
        let warning = lifecycle.memoryPressureWarning
        return warning > 0 && (MemoryPressure.read()?.some10 ?? 0) >= warning
    }

    func fetchTimerFired(_ generation: Int) {
        guard !stopping, generation == fetches.timer else { return }
        let now = Date()
        let due = fetches.scheduler.due(now: now, bound: { self.fetchBound($0) })
        if !due.isEmpty {
            if memoryShortForFetch {
                fetches.scheduler.deferred(due, now: now)
                for app in due {
                    fetchCounts.record(app, "deferred")
                    notice(
                        app,
                        "background fetch deferred \(Self.seconds(FetchScheduler.pressureDelay)): memory pressure"
                    )
                }
            } else {
                for app in due { wakeForFetch(app, now: now) }
            }
        }
        fetchScheduleChanged()
    }

    /// Thaws the app's suspended instance that speaks the channel and sends performFetch; an
    /// app with none (not running, running in the foreground, a plain program) is tried again
    /// one interval later.
    func wakeForFetch(_ app: AppID, now: Date) {
        let bound = fetchBound(app)
        fetches.scheduler.postponed(app, bound: bound, now: now)
        let candidates = table.entries.values.filter {
            $0.app == app && $0.state == .suspended && $0.channel == .ready
                && $0.life.channel != nil && $0.life.fetch == nil
        }
        guard var entry = candidates.min(by: { $0.startedAt < $1.startedAt }) else { return }
        fetches.lastNumber += 1
        let number = fetches.lastNumber
        do {
            try move(&entry, to: .background, detail: "background fetch \(number)")
        } catch {
            publish(
                .message, entry.api, detail: "background fetch \(number): cannot thaw: \(error)")
            return
        }
        let deadline = lifecycle.fetchDeadline
        entry.life.fetch = PendingFetch(number: number, startedAt: now)
        fetchCounts.record(app, "woken")
        send(entry, DaemonMessage(.performFetch, [.fetch: number, .timeRemaining: deadline]))
        save(entry)
        let id = entry.id
        Task {
            try? await Task.sleep(nanoseconds: UInt64(deadline * 1e9))
            self.fetchOverdue(id, number: number)
        }
    }

    // MARK: The answer, or its deadline

    /// fetchCompleted for the fetch in hand (any other was ignored by the caller).
    func fetchAnswered(_ entry: inout Instance, _ result: FetchResult) {
        guard let pending = entry.life.fetch else { return }
        entry.life.fetch = nil
        let now = Date()
        let bound = fetchBound(entry.app)
        fetches.scheduler.answered(entry.app, result, bound: bound, now: now)
        fetchCounts.record(entry.app, result.rawValue)
        let took = Self.seconds((now.timeIntervalSince(pending.startedAt) * 1000).rounded() / 1000)
        let next = fetches.scheduler.plan(entry.app).map {
            "; next in \(Self.seconds(FetchScheduler.interval($0, bound: bound)))"
        }
        publish(
            .message, entry.api,
            detail:
                "background fetch \(pending.number): \(result.rawValue) after \(took)\(next ?? "")")
        entry.nextFetch = nextFetch(entry.app)
        refreeze(&entry, detail: "background fetch \(pending.number) answered")
        fetchScheduleChanged()
    }

    /// No answer within `FetchDeadline`: frozen regardless, and its interval lengthens.
    func fetchOverdue(_ id: String, number: Int) {
        guard var entry = table.entries[id], entry.life.fetch?.number == number else { return }
        entry.life.fetch = nil
        fetchCounts.record(entry.app, "missed")
        let interval = fetches.scheduler.missed(
            entry.app, bound: fetchBound(entry.app), now: Date())
        let misses = fetches.scheduler.plan(entry.app)?.misses ?? 0
        publish(
            .message, entry.api,
            detail:
                "background fetch \(number): no answer within FetchDeadline=\(Self.seconds(lifecycle.fetchDeadline)) (\(misses) in a row)"
                + (interval.map { "; next in \(Self.seconds($0))" } ?? ""))
        entry.life.tasks = [:]
        entry.backgroundTasks = 0
        entry.nextFetch = nextFetch(entry.app)
        refreeze(&entry, detail: "background fetch \(number) not answered in time")
        fetchScheduleChanged()
    }

    /// Back to suspended once the fetch is over, if it is still in the background (a client
    /// may have brought it to the foreground meanwhile) and holds no task (then the grace
    /// period's check freezes it when the last one ends).
    private func refreeze(_ entry: inout Instance, detail: String) {
        guard entry.state == .background else {
            save(entry)
            return
        }
        guard entry.life.tasks.isEmpty else {
            save(entry)
            return
        }
        do {
            try freeze(&entry, detail: detail)
        } catch {
            publish(.message, entry.api, detail: "cannot freeze: \(error)")
        }
        save(entry)
    }
}
