import AppBundle
import AppContainers
import AppdAPI
import Foundation
import Glibc

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
}

struct BackgroundTask {
    var name: String
    var deadline: Date
    /// backgroundTaskWillExpire was sent.
    var warned = false
}

extension Supervisor {
    var lifecycle: LifecycleSettings { store.config.lifecycle }

    /// Where a state sits on iOS's ladder: the app sees only these three (suspended is
    /// background to it: it never learns it was frozen).
    static func level(_ state: InstanceState) -> Int? {
        switch state {
        case .active: 2
        case .inactive, .running: 1
        case .background, .suspended: 0
        default: nil
        }
    }

    static let ladder: [InstanceState] = [.background, .inactive, .active]

    // MARK: Requests

    /// Makes the instance the active app: a suspended one is thawed and comes up through
    /// background and inactive. With `ActivePolicy=single` the active one goes to the
    /// background first.
    public func activate(_ id: String) throws -> APIInstance {
        var entry = try movable(id, "activate")
        if entry.record.instance.service == true {
            throw AppdError(.conflict,
                "instance \(entry.record.instance.id) of \(entry.record.instance.app) is a service (LSBackgroundOnly): it runs in the background, never as the active app",
                hint: "a service needs no activation: it runs as it is; appctl restart \(entry.record.instance.id) starts it afresh")
        }
        if lifecycle.activePolicy == .single {
            for (other, candidate) in entries where other != entry.record.instance.id && candidate.record.instance.state == .active {
                var previous = candidate
                try? move(&previous, to: .background, detail: "\(entry.record.instance.app) became active")
                save(previous)
            }
        }
        try move(&entry, to: .active)
        save(entry)
        return entry.record.instance
    }

    /// Sends the instance to the background (active → inactive → background); it is frozen
    /// after the grace period unless it holds a task or an allowed background mode.
    public func background(_ id: String) throws -> APIInstance {
        var entry = try movable(id, "send to the background")
        if entry.record.instance.state != .suspended { try move(&entry, to: .background) }
        save(entry)
        return entry.record.instance
    }

    /// After a launch: the new instance is inactive; it becomes the active app, or goes to the
    /// background when asked. A service always goes to the background, and leaves the active
    /// app where it is.
    func launched(_ id: String, background: Bool) throws -> APIInstance {
        let service = entries[id]?.record.instance.service == true
        return background || service ? try self.background(id) : try activate(id)
    }

    func movable(_ id: String, _ action: String) throws -> Entry {
        let entry = try live(id, action)
        guard Self.level(entry.record.instance.state) != nil else {
            throw AppdError(.conflict, "cannot \(action) instance \(entry.record.instance.id) of \(entry.record.instance.app): it is \(entry.record.instance.state.rawValue)")
        }
        return entry
    }

    // MARK: Transitions

    /// Moves a live instance up or down the ladder one state at a time: each state is
    /// published, and the app is told each step it can see. A suspended one is thawed first.
    func move(_ entry: inout Entry, to target: InstanceState, detail: String? = nil) throws {
        guard let goal = Self.level(target) else { return }
        if entry.record.instance.state == .suspended {
            try entry.cgroup?.thaw()
            setState(&entry, .background, detail: "thawed")
            rearmWatchdogIfLaunching(entry)
        }
        while let level = Self.level(entry.record.instance.state), level != goal {
            setState(&entry, Self.ladder[level < goal ? level + 1 : level - 1], detail: detail)
            tell(&entry)
        }
        if entry.record.instance.state == .background && entry.life.told != .background {
            entry.life.backgroundSince = Date()
            scheduleBackgroundCheck(entry.record.instance.id, after: lifecycle.backgroundGracePeriod)
        }
    }

    func setState(_ entry: inout Entry, _ state: InstanceState, detail: String? = nil) {
        let now = Date()
        if entry.record.instance.state == .active { entry.record.instance.lastActiveAt = now }
        entry.record.instance.state = state
        entry.record.instance.stateSince = now
        if state == .active { entry.record.instance.lastActiveAt = now }
        entries[entry.record.instance.id] = entry
        try? records.save(entry.record)
        publish(.state, entry.record.instance, detail: detail)
    }

    /// Freezes a background instance: it uses no CPU and gets no events until thawed.
    func freeze(_ entry: inout Entry, detail: String) throws {
        guard let cgroup = entry.cgroup else {
            throw AppdError(.unsupported, "instance \(entry.record.instance.id) has no cgroup to freeze")
        }
        try cgroup.freeze()
        setState(&entry, .suspended, detail: detail)
    }

    /// Brings what the app was told up to date with its state, one ladder step per message.
    /// Only an app that said `ready` is told: before `hello` it is a plain program, between
    /// `hello` and `ready` it is launching and learns its state on `ready`.
    func tell(_ entry: inout Entry) {
        guard entry.record.instance.channel == .ready, entry.life.channel != nil,
            let goal = Self.level(entry.record.instance.state), var level = Self.level(entry.life.told)
        else { return }
        while level != goal {
            let message: [String: Any]
            switch (level, level < goal) {
            case (0, true): message = ["type": "willEnterForeground"]
            case (1, true): message = ["type": "didBecomeActive"]
            case (2, false): message = ["type": "willResignActive"]
            default:
                var enter: [String: Any] = ["type": "didEnterBackground"]
                // Absent when it will not be frozen (an allowed background mode, a service).
                if !Self.neverFrozen(entry.record.instance) { enter["gracePeriod"] = lifecycle.backgroundGracePeriod }
                message = enter
                // The grace period is the app's time after it was told (an app launched into
                // the background learns it on ready).
                entry.life.backgroundSince = Date()
                scheduleBackgroundCheck(entry.record.instance.id, after: lifecycle.backgroundGracePeriod)
            }
            level += level < goal ? 1 : -1
            send(entry, message)
        }
        entry.life.told = Self.ladder[goal]
    }

    /// Sends and records the message as an event (`-> didBecomeActive`), unless `publishing`
    /// is false (answers to requests that changed nothing, which an app may repeat at will).
    @discardableResult
    func send(_ entry: Entry, _ message: [String: Any], publishing: Bool = true) -> Bool {
        guard let channel = entry.life.channel else { return false }
        let sent = channel.send(message)
        if publishing {
            publish(.message, entry.record.instance, detail: "-> \(message["type"] ?? "?")" + (sent ? "" : " (not delivered)"))
        }
        return sent
    }

    // MARK: Background

    /// A service, or an app with an allowed background mode: the grace period never freezes it.
    static func neverFrozen(_ instance: APIInstance) -> Bool {
        instance.service == true || !(instance.backgroundModes ?? []).isEmpty
    }

    func scheduleBackgroundCheck(_ id: String, after seconds: Double) {
        Task {
            try? await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1e9))
            self.backgroundCheck(id)
        }
    }

    /// Freezes an instance that has been in the background for the grace period and holds
    /// nothing that keeps it running. Runs whenever that may have changed; a check that comes
    /// too early (it re-entered the background since) does nothing. An app between hello and
    /// ready is not frozen: the launch watchdog bounds that time, and its grace period starts
    /// when `ready` gets it didEnterBackground.
    func backgroundCheck(_ id: String) {
        guard var entry = entries[id], entry.record.instance.state == .background,
            entry.record.instance.channel != .launching, entry.life.tasks.isEmpty, !Self.neverFrozen(entry.record.instance),
            let since = entry.life.backgroundSince,
            Date().timeIntervalSince(since) >= lifecycle.backgroundGracePeriod - 0.005
        else { return }
        do {
            try freeze(&entry, detail: "background grace period over")
        } catch {
            publish(.message, entry.record.instance, detail: "cannot freeze: \(error)")
        }
        save(entry)
    }


    // MARK: Termination and exit

    /// Termination starts: an app that speaks the channel gets willTerminate with SIGTERM.
    func lifecycleWillTerminate(_ entry: Entry, grace: Double) {
        guard entry.record.instance.channel == .ready || entry.record.instance.channel == .launching else { return }
        send(entry, ["type": "willTerminate", "gracePeriod": grace])
    }

    /// The instance has ended: its channel closes, its tasks are gone.
    func lifecycleEnded(_ entry: inout Entry) {
        entry.life.channel?.close()
        entry.life.channel = nil
        entry.life.tasks = [:]
        entry.record.instance.backgroundTasks = nil
        if entry.record.instance.channel == .launching || entry.record.instance.channel == .ready {
            entry.record.instance.channel = .closed
        }
    }

    /// Kills the instance's cgroup for a lifecycle reason; the exit says `request` and `message`.
    func end(_ entry: inout Entry, _ request: InstanceRecord.Request, message: String) {
        entry.record.request = request
        entry.record.requestMessage = message
        entry.record.instance.state = .terminating
        entry.record.instance.stateSince = Date()
        save(entry)
        publish(.state, entry.record.instance, detail: "\(request.rawValue): \(message)")
        killCgroup(entry)
    }
}
