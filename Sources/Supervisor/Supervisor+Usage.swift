import AppdAPI
import AppdBase
import Foundation
import Sandbox

extension Supervisor {
    /// The live instances and their cgroups: taken on the actor (cheap), read off it
    /// (`sampleUsage`), so that a scrape of 1,000 instances never holds launches up.
    public func usageTargets(app: AppID? = nil) -> [(
        instance: APIInstance, cgroup: (any InstanceCgroup)?
    )] {
        table.entries.values.filter { $0.state != .exited && (app == nil || $0.app == app) }
            .map { ($0.api, $0.cgroup) }
    }

    /// What each live instance uses now (its cgroup's memory and CPU time): two small cgroup
    /// files per instance; an instance that ends meanwhile has none.
    public nonisolated static func sampleUsage(
        _ targets: [(instance: APIInstance, cgroup: (any InstanceCgroup)?)]
    )
        -> [APIInstanceUsage]
    {
        targets.map { instance, cgroup in
            APIInstanceUsage(
                id: instance.id, app: instance.app, state: instance.state,
                startedAt: instance.startedAt,
                memoryBytes: (try? cgroup?.memory())??.current,
                cpuSeconds: ((try? cgroup?.cpuMicroseconds()) ?? nil).map { Double($0) / 1_000_000 }
            )
        }
    }

    /// CPU seconds of the instances that ended under this daemon, per app, for
    /// `appd_app_cpu_seconds_total`. Kept for the daemon's life, across an uninstall and a
    /// reinstall (a counter that went back would read as a reset): one entry per bundle id
    /// launched since the daemon started, which only installs by an admin add.
    public func endedCPUSeconds() -> [AppID: Double] { endedCPU }

    /// Called as an instance ends, before its cgroup goes: what it used stays counted.
    func noteEnded(_ entry: Instance) {
        guard let micro = (try? entry.cgroup?.cpuMicroseconds()) ?? nil, micro > 0 else { return }
        endedCPU[entry.app, default: 0] += Double(micro) / 1_000_000
    }
}
