import AppContainers
import AppdBase
import Sandbox

/// The container's limits are the engine's (docs/oci-runtime.md, "Limits"): a memory, pids or
/// CPU limit config.json (or `update`) sets is applied as set, above `[Sandbox]`'s per-app
/// default too, as runc applies it, so that a pod's `limits.memory: 2Gi` is 2 GiB and the
/// scheduler's view is the node's. A limit the engine does not set keeps the sandbox's. The
/// node caps memory and pids only through an explicit `[OCI] MemoryMax=`/`TasksMax=`, and a
/// request above it is refused with one line naming the key: never lowered silently, which
/// would show only as an OOM kill the pod's author cannot explain.
extension OCIRuntime {
    /// `limits` with what `resources` asks applied over them, within `ceiling`. The result
    /// holds no memory or pids limit above the ceiling: the sandbox's default is capped by it
    /// when the engine asks none.
    static func limits(
        _ limits: CgroupLimits, by resources: OCISpec.Resources?, ceiling: OCISettings
    ) throws -> CgroupLimits {
        var limits = limits
        if let asked = resources?.memory?.limit, asked > 0 {
            if let most = ceiling.memoryMax, asked > most {
                throw AppdError(
                    .permissionDenied,
                    "the memory limit \(asked) bytes is above the node's ceiling [OCI] MemoryMax=\(most) in appd.conf",
                    hint: "ask for at most \(most) bytes, or raise [OCI] MemoryMax")
            }
            limits.memoryMax = asked
        } else if let most = ceiling.memoryMax {
            limits.memoryMax = min(limits.memoryMax ?? most, most)
        }
        if let asked = resources?.pids?.limit, asked > 0 {
            let value = Int(clamping: asked)
            if let most = ceiling.tasksMax, value > most {
                throw AppdError(
                    .permissionDenied,
                    "the pids limit \(asked) is above the node's ceiling [OCI] TasksMax=\(most) in appd.conf",
                    hint: "ask for at most \(most), or raise [OCI] TasksMax")
            }
            limits.pidsMax = value
        } else if let most = ceiling.tasksMax {
            limits.pidsMax = min(limits.pidsMax ?? most, most)
        }
        if let shares = resources?.cpu?.shares, shares >= 2 {
            // runc's conversion of cpu.shares (2...262144) to cpu.weight (1...10000) for v2;
            // v1 writes the shares themselves.
            let clamped = min(shares, 262_144)
            limits.cpuWeight = Int(1 + ((clamped - 2) * 9999) / 262_142)
            limits.cpuShares = Int(clamped)
        }
        // A quota of -1 or 0 is the spec's "no quota"; empty cpus/mems the parent's.
        if let quota = resources?.cpu?.quota, quota > 0 { limits.cpuQuota = quota }
        if let period = resources?.cpu?.period, period > 0 {
            limits.cpuPeriod = Int64(clamping: period)
        }
        if let cpus = resources?.cpu?.cpus, !cpus.isEmpty { limits.cpusetCPUs = cpus }
        if let mems = resources?.cpu?.mems, !mems.isEmpty { limits.cpusetMems = mems }
        // Refused here, before anything is made, with the value named.
        try limits.validate()
        return limits
    }
}
