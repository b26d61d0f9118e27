import AppdBase
import AppdConfig
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
        limits.memoryMax = try applied(
            resources?.memory?.limit, over: limits.memoryMax, ceiling: ceiling.memoryMax,
            what: "memory", unit: " bytes", key: "MemoryMax")
        limits.pidsMax = try applied(
            resources?.pids?.limit.map { Int(clamping: $0) }, over: limits.pidsMax,
            ceiling: ceiling.tasksMax, what: "pids", unit: "", key: "TasksMax")
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

extension OCIRuntime {
    /// The limit the engine `asked` (a positive value) in place of `current`, refused above the
    /// node's `ceiling` with one line naming its `[OCI]` key; with no ask, `current` capped by
    /// the ceiling. One rule for memory and pids.
    fileprivate static func applied<Value: BinaryInteger>(
        _ asked: Value?, over current: Value?, ceiling: Value?, what: String, unit: String,
        key: String
    ) throws -> Value? {
        guard let asked, asked > 0 else {
            guard let most = ceiling else { return current }
            return min(current ?? most, most)
        }
        if let most = ceiling, asked > most {
            throw AppdError(
                .permissionDenied,
                "the \(what) limit \(asked)\(unit) is above the node's ceiling [OCI] \(key)=\(most) in appd.conf",
                hint: "ask for at most \(most)\(unit), or raise [OCI] \(key)")
        }
        return asked
    }
}
