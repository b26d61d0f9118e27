import AppdAPI
import AppdBase
import Foundation
import Glibc

extension Supervisor {
    /// willTerminate on the lifecycle channel and SIGTERM to the launcher (which passes it to
    /// the app), then, if it is still running when the grace period is over, every process of
    /// its cgroup is killed. A suspended instance is thawed first: a frozen process cannot act
    /// on SIGTERM.
    public func terminate(_ id: String, grace: Double? = nil) throws -> APIInstance {
        var entry = try live(id, "terminate")
        let grace = max(0, grace ?? settings.terminateGracePeriod)
        let transition = try transition(entry, on: .terminate, "terminate")
        if transition.actions.contains(.thaw) {
            stopReclaim(&entry)
            try entry.cgroup?.thaw()
        }
        if entry.request == nil { entry.request = .terminate }
        entry.state = transition.state
        entry.graceDeadline = Date().addingTimeInterval(grace)
        lifecycleWillTerminate(entry, grace: grace)
        if let pid = entry.pid { Glibc.kill(pid, SIGTERM) }
        save(entry)
        publish(.state, entry.api)
        scheduleGraceKill(entry.id, after: grace)
        return entry.api
    }

    func scheduleGraceKill(_ id: String, after seconds: Double) {
        Task {
            try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            self.graceExpired(id)
        }
    }

    func graceExpired(_ id: String) {
        guard var entry = table.entries[id], entry.state == .terminating else { return }
        entry.request = .killAfterGrace
        save(entry)
        killCgroup(entry)
    }

    /// Kills every process of the instance at once.
    public func kill(_ id: String) throws -> APIInstance {
        var entry = try live(id, "kill")
        entry.request = .kill
        entry.state = try transition(entry, on: .kill, "kill").state
        save(entry)
        publish(.state, entry.api)
        killCgroup(entry)
        return entry.api
    }

    func killCgroup(_ entry: Instance) {
        if let cgroup = entry.cgroup {
            do { try cgroup.kill(timeoutSeconds: 2) } catch {
                // The freezer or kill file failed: the launcher at least must go, which takes
                // PID 1 of the app's namespace, and with it every process inside.
                if let pid = entry.pid { Glibc.kill(pid, SIGKILL) }
            }
        } else if let pid = entry.pid {
            Glibc.kill(pid, SIGKILL)
        }
    }

    /// Sends the instance to the background (the app is told) and freezes every process of
    /// it (cgroup freezer) at once, whatever tasks or background modes it holds: it uses no
    /// CPU until resumed.
    public func suspend(_ id: String) throws -> APIInstance {
        var entry = try live(id, "suspend")
        if entry.state == .suspended { return entry.api }
        guard InstanceLifecycle.level(entry.state) != nil else {
            throw AppdError(
                .conflict,
                "instance \(entry.id) is \(entry.state.rawValue); only a running instance can be suspended"
            )
        }
        guard entry.cgroup != nil else {
            throw AppdError(.unsupported, "instance \(id) has no cgroup to freeze")
        }
        guard entry.service != true else {
            throw AppdError(
                .conflict,
                "instance \(entry.id) of \(entry.app) is a service (LSBackgroundOnly): services are never frozen",
                hint: "appctl terminate \(entry.id) stops it")
        }
        try move(&entry, to: .background)
        try freeze(&entry, detail: "suspended by request")
        save(entry)
        return entry.api
    }

    /// A suspended instance comes back as the active app (background → inactive → active, as
    /// `activate`); a running one is left as it is.
    public func resume(_ id: String) throws -> APIInstance {
        let entry = try live(id, "resume")
        guard entry.state == .suspended else {
            if entry.state.isRunning { return entry.api }
            throw AppdError(
                .conflict, "instance \(entry.id) is \(entry.state.rawValue), not suspended")
        }
        return try activate(id)
    }

    /// The entry of an instance that has not exited.
    func live(_ id: String, _ action: String) throws -> Instance { try table.live(id, action) }

    /// Keeps the entry and its record in step.
    func save(_ entry: Instance) {
        table.entries[entry.id] = entry
        try? records.save(entry)
    }
}
