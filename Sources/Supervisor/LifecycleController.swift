import AppdAPI
import AppdConfig
import Foundation
import LifecycleProtocol

/// The lifecycle controller (docs/lifecycle.md): what the lifecycle does to one instance, decided
/// from the instance and `[Lifecycle]` — the messages that tell the app its state, when the grace
/// period freezes it, which background task it is granted and what an overdue one costs it,
/// whether the launch watchdog ends it. It decides; the actor acts on the decision (sends,
/// freezes, kills, schedules, publishes), as it does on ServiceKeeper's. The states and their
/// order are InstanceLifecycle's.
struct LifecycleController {
    let settings: LifecycleSettings

    // MARK: Telling the app

    /// A service, or an app with an allowed background mode: the grace period never freezes it.
    static func neverFrozen(_ entry: Instance) -> Bool {
        entry.service == true || !(entry.backgroundModes ?? []).isEmpty
    }

    /// The messages that bring an app told `told` to `state`, one ladder step each; none when
    /// either is off the ladder. `didEnterBackground` carries the grace period, unless the app
    /// will never be frozen.
    func messages(told: InstanceState, to state: InstanceState, neverFrozen: Bool)
        -> [DaemonMessage]
    {
        guard let goal = InstanceLifecycle.level(state),
            var level = InstanceLifecycle.level(told)
        else { return [] }
        var messages: [DaemonMessage] = []
        while level != goal {
            switch (level, level < goal) {
            case (0, true): messages.append(DaemonMessage(.willEnterForeground))
            case (1, true): messages.append(DaemonMessage(.didBecomeActive))
            case (2, false): messages.append(DaemonMessage(.willResignActive))
            default:
                var enter = DaemonMessage(.didEnterBackground)
                if !neverFrozen { enter.fields[.gracePeriod] = settings.backgroundGracePeriod }
                messages.append(enter)
            }
            level += level < goal ? 1 : -1
        }
        return messages
    }

    // MARK: The grace period

    /// Whether a background instance is due to be frozen at `now`: the grace period has passed
    /// since it entered the background (or was told so), it is not between hello and ready (the
    /// launch watchdog bounds that time), and it holds no background task, no background fetch
    /// (its answer or its deadline freezes it) and nothing that keeps it running. A check that comes early (it re-entered the background since) says no.
    func freezeDue(_ entry: Instance, now: Date) -> Bool {
        guard entry.state == .background, entry.channel != .launching, entry.life.tasks.isEmpty,
            entry.life.fetch == nil,
            !Self.neverFrozen(entry), let since = entry.life.backgroundSince
        else { return false }
        return now.timeIntervalSince(since) >= settings.backgroundGracePeriod - 0.005
    }

    // MARK: The launch watchdog

    /// Whether the launch watchdog, firing, ends the instance: it said hello and not ready, and
    /// it is neither ending nor frozen (a frozen app cannot answer: the watchdog starts again
    /// when it is thawed).
    static func watchdogEnds(_ entry: Instance) -> Bool {
        entry.channel == .launching && entry.state != .exited && entry.state != .terminating
            && entry.state != .suspended
    }

    // MARK: Background tasks

    enum TaskAnswer: Equatable {
        /// Task number `task`, for `seconds`.
        case granted(task: Int, seconds: Double)
        /// Refused, and why (the app reads it in `backgroundTaskBegan`).
        case refused(String)

        var isGranted: Bool {
            if case .granted = self { return true }
            return false
        }
    }

    /// A request for a background task of `seconds` (nil: the default): granted and held in
    /// `entry`, or refused while it terminates or holds `MaxBackgroundTasks` already.
    func beginTask(_ entry: inout Instance, name: String, seconds: Double?, now: Date)
        -> TaskAnswer
    {
        if entry.state == .terminating { return .refused("the app is terminating") }
        guard entry.life.tasks.count < settings.maxBackgroundTasks else {
            return .refused(
                "it holds \(entry.life.tasks.count) background tasks already (MaxBackgroundTasks)")
        }
        let task = entry.life.nextTask
        entry.life.nextTask += 1
        let time = settings.taskTime(requested: seconds)
        entry.life.tasks[task] = BackgroundTask(name: name, deadline: now.addingTimeInterval(time))
        entry.backgroundTasks = entry.life.tasks.count
        return .granted(task: task, seconds: time)
    }

    enum Expiry: Equatable {
        /// Frozen while it held the task: it cannot end it and needs no time; the task is gone.
        case dropped
        /// Warned (backgroundTaskWillExpire) with `grace` seconds to end it.
        case warn(grace: Double)
    }

    /// The task's time is up; nil when it is no longer held or was warned already.
    func taskExpired(_ entry: inout Instance, task: Int) -> Expiry? {
        guard var held = entry.life.tasks[task], !held.warned else { return nil }
        if entry.state == .suspended {
            entry.life.tasks[task] = nil
            entry.backgroundTasks = entry.life.tasks.count
            return .dropped
        }
        held.warned = true
        entry.life.tasks[task] = held
        return .warn(grace: settings.backgroundTaskExpirationGrace)
    }

    enum Overdue: Equatable {
        /// In the foreground the task just ends.
        case ended
        /// In the background the app is killed (`ExpiredBackgroundTask=kill`) with this message.
        case kill(message: String)
        /// … or the task ends and the grace period may freeze it (`=suspend`).
        case expired(detail: String)
    }

    /// Still held after the warning: the task is taken from `entry`; nil when it was ended.
    func taskOverdue(_ entry: inout Instance, task: Int) -> Overdue? {
        guard let held = entry.life.tasks.removeValue(forKey: task) else { return nil }
        entry.backgroundTasks = entry.life.tasks.count
        guard entry.state == .background else { return .ended }
        if settings.expiredTaskAction == .kill {
            return .kill(
                message:
                    "background task \(task) '\(held.name)' was not ended in time (BackgroundTaskTime, then BackgroundTaskExpirationGrace)"
            )
        }
        return .expired(detail: "background task \(task) '\(held.name)' expired")
    }
}
