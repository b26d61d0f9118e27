import AppContainers
import AppdAPI
import AppdBase
import AppdConfig
import Foundation
import Glibc
import LifecycleProtocol

/// What the supervisor keeps per instance for its lifecycle (docs/lifecycle.md). Not in the
/// instance record: the channel and the tasks die with the daemon (an adopted instance's
/// channel is `closed`).
struct LifecycleState {
    var channel: LifecycleChannel?
    /// The state the app was last told about (through `ready`): what its runtime believes.
    var told: InstanceState = .inactive
    var tasks: [Int: BackgroundTask] = [:]
    var nextTask = 1
    /// When it last entered the background: the grace period runs from here.
    var backgroundSince: Date?
    /// Stops the reclaim its last freeze started, once it is thawed (Supervisor+Reclaim.swift).
    var reclaim: ReclaimStop?
    /// The background fetch it was woken for and has not answered (Supervisor+Fetch.swift).
    var fetch: PendingFetch?
}

struct BackgroundTask {
    var name: String
    var deadline: Date
    /// backgroundTaskWillExpire was sent.
    var warned = false
}

extension Supervisor {
    var lifecycle: LifecycleSettings { configuration.current.lifecycle }
    /// The lifecycle's decisions under the settings in force (LifecycleController.swift).
    var controller: LifecycleController { LifecycleController(settings: lifecycle) }

    // MARK: Requests

    /// Makes the instance the active app: a suspended one is thawed and comes up through
    /// background and inactive. With `ActivePolicy=single` the active one goes to the
    /// background first.
    public func activate(_ id: String) throws -> APIInstance {
        var entry = try movable(id, "activate")
        if entry.service == true {
            throw AppdError(
                .conflict,
                "instance \(entry.id) of \(entry.app) is a service (LSBackgroundOnly): it runs in the background, never as the active app",
                hint:
                    "a service needs no activation: it runs as it is; appctl restart \(entry.id) starts it afresh"
            )
        }
        if lifecycle.activePolicy == .single {
            for (other, candidate) in table.entries
            where other != entry.id && candidate.state == .active {
                var previous = candidate
                try? move(&previous, to: .background, detail: "\(entry.app) became active")
                save(previous)
            }
        }
        try move(&entry, to: .active)
        save(entry)
        return entry.api
    }

    /// Sends the instance to the background (active → inactive → background); it is frozen
    /// after the grace period unless it holds a task or an allowed background mode.
    public func background(_ id: String) throws -> APIInstance {
        var entry = try movable(id, "send to the background")
        if entry.state != .suspended { try move(&entry, to: .background) }
        save(entry)
        return entry.api
    }

    /// After a launch: the new instance is inactive; it becomes the active app, or goes to the
    /// background when asked. A service always goes to the background, and leaves the active
    /// app where it is.
    func launched(_ id: String, background: Bool) throws -> APIInstance {
        let service = table.entries[id]?.service == true
        return background || service ? try self.background(id) : try activate(id)
    }

    func movable(_ id: String, _ action: String) throws -> Instance {
        let entry = try live(id, action)
        guard InstanceLifecycle.level(entry.state) != nil else {
            throw AppdError(
                .conflict,
                "cannot \(action) instance \(entry.id) of \(entry.app): it is \(entry.state.rawValue)"
            )
        }
        return entry
    }

    // MARK: Transitions

    /// Moves a live instance up or down the ladder one state at a time: each state is
    /// published, and the app is told each step it can see. A suspended one is thawed first.
    /// The steps are InstanceLifecycle's; an instance off the ladder stays where it is.
    func move(_ entry: inout Instance, to target: InstanceState, detail: String? = nil) throws {
        guard
            let transition = try? InstanceLifecycle.transition(
                from: entry.state, on: .move(to: target))
        else { return }
        var thawed = false
        for action in transition.actions {
            switch action {
            case .thaw:
                stopReclaim(&entry)
                try entry.cgroup?.thaw()
                thawed = true
            case .enter(let state):
                setState(&entry, state, detail: thawed ? "thawed" : detail)
                thawed = false
            case .rearmLaunchWatchdog: rearmWatchdogIfLaunching(entry)
            case .tellApp: tell(&entry)
            case .freeze, .signalTerminate, .killCgroup: break
            }
        }
        if entry.state == .background && entry.life.told != .background {
            entry.life.backgroundSince = Date()
            scheduleBackgroundCheck(entry.id, after: lifecycle.backgroundGracePeriod)
        }
    }

    /// The lifecycle's next step for the instance (InstanceLifecycle), or the conflict that
    /// names the instance and its state.
    func transition(_ entry: Instance, on event: InstanceLifecycle.Event, _ action: String) throws
        -> InstanceLifecycle.Transition
    {
        do {
            return try InstanceLifecycle.transition(from: entry.state, on: event)
        } catch {
            throw AppdError(
                .conflict,
                "cannot \(action) instance \(entry.id) of \(entry.app): it is \(entry.state.rawValue)"
            )
        }
    }

    func setState(_ entry: inout Instance, _ state: InstanceState, detail: String? = nil) {
        let now = Date()
        if entry.state == .active { entry.lastActiveAt = now }
        entry.state = state
        entry.stateSince = now
        if state == .active { entry.lastActiveAt = now }
        table.entries[entry.id] = entry
        try? records.save(entry)
        publish(.state, entry.api, detail: detail)
    }

    /// Freezes a background instance: it uses no CPU and gets no events until thawed.
    func freeze(_ entry: inout Instance, detail: String) throws {
        guard let cgroup = entry.cgroup else {
            throw AppdError(.unsupported, "instance \(entry.id) has no cgroup to freeze")
        }
        let transition = try transition(entry, on: .freeze, "freeze")
        try cgroup.freeze()
        setState(&entry, transition.state, detail: detail)
        giveMemoryBack(&entry, cgroup)
    }

    /// Brings what the app was told up to date with its state, one ladder step per message.
    /// Only an app that said `ready` is told: before `hello` it is a plain program, between
    /// `hello` and `ready` it is launching and learns its state on `ready`.
    func tell(_ entry: inout Instance) {
        guard entry.channel == .ready, entry.life.channel != nil,
            let level = InstanceLifecycle.level(entry.state)
        else { return }
        let messages = controller.messages(
            told: entry.life.told, to: entry.state,
            neverFrozen: LifecycleController.neverFrozen(entry))
        for message in messages {
            if message.type == .didEnterBackground {
                // The grace period is the app's time after it was told (an app launched into
                // the background learns it on ready).
                entry.life.backgroundSince = Date()
                scheduleBackgroundCheck(entry.id, after: lifecycle.backgroundGracePeriod)
            }
            send(entry, message)
        }
        entry.life.told = InstanceLifecycle.ladder[level]
    }

    /// Sends and records the message as an event (`-> didBecomeActive`), unless `publishing`
    /// is false (answers to requests that changed nothing, which an app may repeat at will).
    @discardableResult
    func send(_ entry: Instance, _ message: DaemonMessage, publishing: Bool = true) -> Bool {
        guard let channel = entry.life.channel else { return false }
        let sent = channel.send(message.json)
        if publishing {
            publish(
                .message, entry.api,
                detail: "-> \(message.type.rawValue)" + (sent ? "" : " (not delivered)"))
        }
        return sent
    }

    // MARK: Background

    func scheduleBackgroundCheck(_ id: String, after seconds: Double) {
        Task {
            try? await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1e9))
            self.backgroundCheck(id)
        }
    }

    /// Freezes an instance whose grace period is over (LifecycleController.freezeDue). Runs
    /// whenever that may have changed; an app between hello and ready gets its grace period
    /// when `ready` tells it didEnterBackground.
    func backgroundCheck(_ id: String) {
        guard var entry = table.entries[id], controller.freezeDue(entry, now: Date()) else {
            return
        }
        do {
            try freeze(&entry, detail: "background grace period over")
        } catch {
            publish(.message, entry.api, detail: "cannot freeze: \(error)")
        }
        save(entry)
    }

    // MARK: Termination and exit

    /// Termination starts: an app that speaks the channel gets willTerminate with SIGTERM.
    func lifecycleWillTerminate(_ entry: Instance, grace: Double) {
        guard entry.channel == .ready || entry.channel == .launching else { return }
        send(entry, DaemonMessage(.willTerminate, [.gracePeriod: grace]))
    }

    /// The instance has ended: its channel closes, its tasks are gone.
    func lifecycleEnded(_ entry: inout Instance) {
        entry.life.channel?.close()
        entry.life.channel = nil
        entry.life.tasks = [:]
        entry.backgroundTasks = nil
        if entry.channel == .launching || entry.channel == .ready {
            entry.channel = .closed
        }
    }

    /// Kills the instance's cgroup for a lifecycle reason; the exit says `request` and `message`.
    func end(_ entry: inout Instance, _ request: Instance.Request, message: String) {
        entry.request = request
        entry.requestMessage = message
        entry.state =
            (try? InstanceLifecycle.transition(from: entry.state, on: .kill))?.state ?? entry.state
        entry.stateSince = Date()
        save(entry)
        publish(.state, entry.api, detail: "\(request.rawValue): \(message)")
        killCgroup(entry)
    }
}
