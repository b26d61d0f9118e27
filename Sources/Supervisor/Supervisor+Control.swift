import AppBundle
import AppdAPI
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
        if entry.record.instance.state == .suspended { try entry.cgroup?.thaw() }
        if entry.record.request == nil { entry.record.request = .terminate }
        entry.record.instance.state = .terminating
        entry.record.graceDeadline = Date().addingTimeInterval(grace)
        lifecycleWillTerminate(entry, grace: grace)
        if let pid = entry.record.instance.pid { Glibc.kill(pid, SIGTERM) }
        save(entry)
        publish(.state, entry.record.instance)
        scheduleGraceKill(entry.record.instance.id, after: grace)
        return entry.record.instance
    }

    func scheduleGraceKill(_ id: String, after seconds: Double) {
        Task {
            try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            self.graceExpired(id)
        }
    }

    func graceExpired(_ id: String) {
        guard var entry = entries[id], entry.record.instance.state == .terminating else { return }
        entry.record.request = .killAfterGrace
        save(entry)
        killCgroup(entry)
    }

    /// Kills every process of the instance at once.
    public func kill(_ id: String) throws -> APIInstance {
        var entry = try live(id, "kill")
        entry.record.request = .kill
        entry.record.instance.state = .terminating
        save(entry)
        publish(.state, entry.record.instance)
        killCgroup(entry)
        return entry.record.instance
    }

    func killCgroup(_ entry: Entry) {
        if let cgroup = entry.cgroup {
            do { try cgroup.kill(timeoutSeconds: 2) } catch {
                // The freezer or kill file failed: the launcher at least must go, which takes
                // PID 1 of the app's namespace, and with it every process inside.
                if let pid = entry.record.instance.pid { Glibc.kill(pid, SIGKILL) }
            }
        } else if let pid = entry.record.instance.pid {
            Glibc.kill(pid, SIGKILL)
        }
    }

    /// Sends the instance to the background (the app is told) and freezes every process of
    /// it (cgroup freezer) at once, whatever tasks or background modes it holds: it uses no
    /// CPU until resumed.
    public func suspend(_ id: String) throws -> APIInstance {
        var entry = try live(id, "suspend")
        if entry.record.instance.state == .suspended { return entry.record.instance }
        guard Self.level(entry.record.instance.state) != nil else {
            throw AppdError(.conflict, "instance \(entry.record.instance.id) is \(entry.record.instance.state.rawValue); only a running instance can be suspended")
        }
        guard entry.cgroup != nil else { throw AppdError(.unsupported, "instance \(id) has no cgroup to freeze") }
        guard entry.record.instance.service != true else {
            throw AppdError(.conflict,
                "instance \(entry.record.instance.id) of \(entry.record.instance.app) is a service (LSBackgroundOnly): services are never frozen",
                hint: "appctl terminate \(entry.record.instance.id) stops it")
        }
        try move(&entry, to: .background)
        try freeze(&entry, detail: "suspended by request")
        save(entry)
        return entry.record.instance
    }

    /// A suspended instance comes back as the active app (background → inactive → active, as
    /// `activate`); a running one is left as it is.
    public func resume(_ id: String) throws -> APIInstance {
        let entry = try live(id, "resume")
        guard entry.record.instance.state == .suspended else {
            if entry.record.instance.state.isRunning { return entry.record.instance }
            throw AppdError(.conflict, "instance \(entry.record.instance.id) is \(entry.record.instance.state.rawValue), not suspended")
        }
        return try activate(id)
    }

    /// The entry of an instance that has not exited.
    func live(_ id: String, _ action: String) throws -> Entry {
        let entry = try entry(id)
        guard entry.record.instance.state != .exited else {
            throw AppdError(.conflict, "cannot \(action) instance \(entry.record.instance.id) of \(entry.record.instance.app): it has exited (\(entry.record.instance.exit?.description ?? "?"))")
        }
        return entry
    }

    /// Keeps the entry and its record in step.
    func save(_ entry: Entry) {
        entries[entry.record.instance.id] = entry
        try? records.save(entry.record)
    }
}
