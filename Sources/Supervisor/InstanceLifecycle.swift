import AppdAPI
import Foundation
import Glibc

/// The lifecycle's rules (docs/lifecycle.md) as pure functions: a state and an event give the
/// next state and what must be done to get there, in order. No clock, no cgroup, no channel:
/// the Supervisor does what the actions say (Supervisor+Lifecycle, +Control, +Exit, +Adopt),
/// and SupervisorTests checks the rules without root.
enum InstanceLifecycle {
    enum Event: Equatable, Sendable {
        /// The launcher has started (it is building the sandbox, then runs the app).
        case spawned
        /// Activate or send to the background: up or down iOS's ladder, one state at a time.
        case move(to: InstanceState)
        /// The background grace period is over, or a suspend was asked.
        case freeze
        /// Asked to stop: told, SIGTERM, a grace period.
        case terminate
        /// Killed at once: `appctl kill`, the grace period over, a lifecycle end (watchdog,
        /// expired task, jetsam).
        case kill
        /// The launcher is gone.
        case launcherEnded
    }

    enum Action: Equatable, Sendable {
        /// Thaw the cgroup: a frozen process can neither move nor act on SIGTERM.
        case thaw
        /// Set, save and publish the state.
        case enter(InstanceState)
        /// A thawed app that is still launching gets its launch watchdog again.
        case rearmLaunchWatchdog
        /// Tell the app each ladder step it can see (if it said `ready`).
        case tellApp
        /// Freeze the cgroup.
        case freeze
        /// willTerminate on the channel and SIGTERM to the launcher, then the grace period.
        case signalTerminate
        /// Kill every process of the cgroup.
        case killCgroup
    }

    struct Transition: Equatable, Sendable {
        var state: InstanceState
        var actions: [Action]
    }

    /// An event the state does not allow (the caller's error names the instance).
    struct Refusal: Error, Equatable {
        var state: InstanceState
        var event: Event
    }

    /// Where a state sits on iOS's ladder: the app sees only these three (suspended is
    /// background to it: it never learns it was frozen). Nil: not on the ladder.
    static func level(_ state: InstanceState) -> Int? {
        switch state {
        case .active: 2
        case .inactive, .running: 1
        case .background, .suspended: 0
        default: nil
        }
    }

    static let ladder: [InstanceState] = [.background, .inactive, .active]

    /// The next state of an instance in `state` on `event`, and the actions, in order.
    static func transition(from state: InstanceState, on event: Event) throws(Refusal) -> Transition
    {
        switch event {
        case .spawned:
            guard state == .launching else { throw Refusal(state: state, event: event) }
            return Transition(state: .inactive, actions: [.enter(.inactive)])
        case .move(let target):
            guard let goal = level(target) else { return Transition(state: state, actions: []) }
            guard level(state) != nil else { throw Refusal(state: state, event: event) }
            var actions: [Action] = []
            var current = state
            if current == .suspended {
                actions += [.thaw, .enter(.background), .rearmLaunchWatchdog]
                current = .background
            }
            while let at = level(current), at != goal {
                current = ladder[at < goal ? at + 1 : at - 1]
                actions += [.enter(current), .tellApp]
            }
            return Transition(state: current, actions: actions)
        case .freeze:
            guard state == .background else { throw Refusal(state: state, event: event) }
            return Transition(state: .suspended, actions: [.freeze, .enter(.suspended)])
        case .terminate:
            guard state != .exited else { throw Refusal(state: state, event: event) }
            return Transition(
                state: .terminating,
                actions: (state == .suspended ? [.thaw] : []) + [
                    .enter(.terminating), .signalTerminate,
                ])
        case .kill:
            guard state != .exited else { throw Refusal(state: state, event: event) }
            return Transition(state: .terminating, actions: [.enter(.terminating), .killCgroup])
        case .launcherEnded:
            guard state != .exited else { throw Refusal(state: state, event: event) }
            return Transition(state: .exited, actions: [.killCgroup, .enter(.exited)])
        }
    }

    /// What survives of an instance's lifecycle across a daemon restart: its state (an old
    /// daemon's `running` reads as `inactive`), not its channel (the daemon's end died with the
    /// daemon, so an app that spoke it is `closed`) nor its tasks.
    static func adopted(_ instance: Instance) -> Instance {
        var instance = instance
        if instance.state == .running { instance.state = .inactive }
        if instance.state != .exited {
            if instance.channel == .launching || instance.channel == .ready {
                instance.channel = .closed
            }
            if instance.backgroundTasks != nil { instance.backgroundTasks = 0 }
        }
        return instance
    }

    enum Adoption: Equatable {
        /// It had exited already: kept for `ps --all` and its log.
        case keepExited
        /// Its launcher is gone (or the pid is another process now): closed with its status.
        case closeAsEnded
        /// Its launcher still runs: watched again.
        case watch(pid_t)
    }

    /// What a daemon that starts does with a recorded instance, given the start time of the
    /// process that now has its launcher's pid (nil: no such process).
    static func adoption(of instance: Instance, launcherStartTime: UInt64?) -> Adoption {
        guard instance.state != .exited else { return .keepExited }
        guard let pid = instance.pid, let started = instance.pidStartTime,
            launcherStartTime == started
        else { return .closeAsEnded }
        return .watch(pid)
    }
}
