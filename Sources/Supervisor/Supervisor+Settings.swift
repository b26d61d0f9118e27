import AppContainers
import AppdConfig
import Sandbox

extension Supervisor {
    /// A reloaded appd.conf (the store already holds it): later launches use its launcher and
    /// `[Supervisor]` settings (grace period, instances kept); running instances keep their
    /// sandbox, cgroup and limits. The caller has checked that the launcher exists and kept
    /// `CgroupParent` and `LogMaxBytes`, which only a restart changes.
    public func applySettings(_ config: AppdConfiguration) throws {
        defer { serviceScheduleChanged() }
        try spawner.apply(config)
        settings = config.supervisor
        // Audit's failure mode may have changed since the start (DenialLog itself is restart-only).
        logDenials = Self.shouldLogDenials(settings)
    }
}

extension Supervisor {
    /// Puts the cgroup limits of changed `[App ID]` sections (MemoryMax, TasksMax, CPUWeight)
    /// on that app's running instances at once; `old` is the configuration they were launched
    /// under. Host-wide `[Sandbox]` limits stay launch-time only, as documented for reload.
    /// A memory limit below an instance's usage is applied all the same (the kernel reclaims,
    /// then OOM-kills inside that instance: the admin asked for it); v1 refuses it with EBUSY
    /// when it cannot reclaim, and that is reported. Returns one line per instance touched.
    public func applyOverrideLimits(old: AppdConfiguration, new: AppdConfiguration) -> [String] {
        var lines: [String] = []
        for id in table.entries.keys.sorted() {
            guard let entry = table.entries[id], entry.state != .exited,
                let cgroup = entry.cgroup
            else { continue }
            let app = entry.app
            let before = old.override(for: app)
            let after = new.override(for: app)
            guard before != after else { continue }
            let oldLimits =
                before?.cgroupLimits(settings: old.sandbox)
                ?? CgroupLimits(memoryMax: old.sandbox.memoryMax, pidsMax: old.sandbox.tasksMax)
            var limits =
                after?.cgroupLimits(settings: new.sandbox)
                ?? CgroupLimits(memoryMax: new.sandbox.memoryMax, pidsMax: new.sandbox.tasksMax)
            // A weight the override dropped goes back to the kernel's default.
            if limits.cpuWeight == nil, oldLimits.cpuWeight != nil { limits.cpuWeight = 100 }
            guard limits != oldLimits else { continue }
            var parts: [String] = []
            if limits.memoryMax != oldLimits.memoryMax {
                parts.append("memory \(limits.memoryMax.map(String.init) ?? "max")")
            }
            if limits.pidsMax != oldLimits.pidsMax {
                parts.append("tasks \(limits.pidsMax.map(String.init) ?? "max")")
            }
            if limits.cpuWeight != oldLimits.cpuWeight {
                parts.append("cpu weight \(limits.cpuWeight.map(String.init) ?? "100")")
            }
            do {
                try cgroup.setLimits(limits)
                lines.append("\(app) \(id): \(parts.joined(separator: ", "))")
            } catch {
                lines.append(
                    "\(app) \(id): NOT APPLIED (\(parts.joined(separator: ", "))): \(error)")
            }
        }
        return lines
    }
}
