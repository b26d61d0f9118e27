import AppdBase
import CLinux
import Glibc
import Sandbox

/// A container's cgroup as systemd's own unit (`--systemd-cgroup`): after the sandbox is
/// started in the scope's cgroup (made by the cgroup driver at the path systemd gives that
/// scope), systemd is asked over D-Bus for a transient scope unit of that name holding the
/// container's PID 1, `Delegate=yes`, in the slice the engine named, with the container's
/// limits as the unit's properties — what runc's systemd driver asks. Without it systemd does
/// not know the cgroup: it realizes the slice's `cgroup.subtree_control` from what its own
/// units need and may take the memory controller from under the container (measured in the
/// VM suite's bookworm guest, docs/oci-runtime.md). The D-Bus call goes through `busctl` (part
/// of systemd, so on every host where `--systemd-cgroup` means anything): appd-oci is linked
/// statically and Debian ships no static libsystemd.
enum SystemdScope {
    static let busctl = "/usr/bin/busctl"

    /// `StartTransientUnit(unit, "fail", properties, [])`.
    static func start(unit: String, slice: String, pid: pid_t, limits: CgroupLimits) throws {
        // Each property is its name, its D-Bus signature and its value's words.
        let properties: [[String]] =
            [
                ["PIDs", "au", "1", String(pid)], ["Delegate", "b", "true"], ["Slice", "s", slice],
                ["Description", "s", "appd-oci container \(unit)"],
                // A container that failed (an OOM kill) leaves no failed unit behind, as runc's.
                ["CollectMode", "s", "inactive-or-failed"],
            ] + limitProperties(limits)
        try call(
            "StartTransientUnit", "ssa(sv)a(sa(sv))",
            [unit, "fail", String(properties.count)] + properties.flatMap { $0 } + ["0"])
    }

    /// `SetUnitProperties(unit, runtime, properties)`: `update`'s limits, so that systemd's next
    /// realization of the unit writes them and not the ones it started with.
    static func setLimits(unit: String, _ limits: CgroupLimits) throws {
        let properties = limitProperties(limits)
        guard !properties.isEmpty else { return }
        try call(
            "SetUnitProperties", "sba(sv)",
            [unit, "true", String(properties.count)] + properties.flatMap { $0 })
    }

    /// Whether systemd holds a transient unit of that name (it writes each to
    /// /run/systemd/transient): a container `create` made a scope for.
    static func isTransientUnit(_ unit: String) -> Bool {
        unit.hasSuffix(".scope") && !unit.contains("/")
            && access("/run/systemd/transient/\(unit)", F_OK) == 0
    }

    static func limitProperties(_ limits: CgroupLimits) -> [[String]] {
        var properties: [[String]] = []
        if let memory = limits.memoryMax { properties.append(["MemoryMax", "t", String(memory)]) }
        if let pids = limits.pidsMax { properties.append(["TasksMax", "t", String(pids)]) }
        if let weight = limits.cpuWeight { properties.append(["CPUWeight", "t", String(weight)]) }
        if let quota = limits.cpuQuota {
            properties.append(["CPUQuotaPerSecUSec", "t", String(quotaPerSecond(limits, quota))])
        }
        if let period = limits.cpuPeriod {
            properties.append(["CPUQuotaPeriodUSec", "t", String(period)])
        }
        if let cpus = limits.cpusetCPUs, let mask = cpuMask(cpus) {
            properties.append(["AllowedCPUs", "ay", String(mask.count)] + mask.map(String.init))
        }
        if let mems = limits.cpusetMems, let mask = cpuMask(mems) {
            properties.append(
                ["AllowedMemoryNodes", "ay", String(mask.count)] + mask.map(String.init))
        }
        return properties
    }

    /// systemd's CPUQuota as runc converts it: quota per second, rounded up to systemd's
    /// granularity of 10 ms per second (1% of a CPU). The limits are validated: quota at most
    /// 2^44 - 1 microseconds, so quota * 10^6 fits in UInt64.
    static func quotaPerSecond(_ limits: CgroupLimits, _ quota: Int64) -> UInt64 {
        let period = UInt64(clamping: max(limits.cpuPeriod ?? 100_000, 1))
        let (product, overflow) = UInt64(clamping: quota).multipliedReportingOverflow(
            by: 1_000_000)
        var perSecond = overflow ? UInt64.max / 2 : product / period
        if perSecond % 10_000 != 0 { perSecond = (perSecond / 10_000 + 1) * 10_000 }
        return perSecond
    }

    /// A validated CPU list (`0-3,6`) as systemd's `ay` bitmask: bit N of byte N/8 for CPU N
    /// (what systemd's cpu_set_to_dbus sends); nil for a list that does not parse.
    static func cpuMask(_ list: String) -> [UInt8]? {
        guard (try? Cgroups.validateCPUList(list, "cpuset")) != nil else { return nil }
        var mask: [UInt8] = []
        for item in list.split(separator: ",") {
            let bounds = item.split(separator: "-").compactMap { Int($0) }
            guard let low = bounds.first, let high = bounds.last else { return nil }
            for cpu in low...high {
                if mask.count <= cpu / 8 {
                    mask += [UInt8](repeating: 0, count: cpu / 8 + 1 - mask.count)
                }
                mask[cpu / 8] |= 1 << UInt8(cpu % 8)
            }
        }
        return mask
    }

    /// One method call of org.freedesktop.systemd1.Manager on the system bus, through busctl;
    /// its error output is the error's text.
    private static func call(_ method: String, _ signature: String, _ arguments: [String]) throws {
        let argv =
            [
                busctl, "--system", "--quiet", "--timeout=10", "call", "org.freedesktop.systemd1",
                "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", method, signature,
            ] + arguments
        let result: HostCommand.Result
        do {
            // busctl's own --timeout bounds the call; ours bounds busctl.
            result = try HostCommand(path: busctl, arguments: argv, timeoutSeconds: 15).run()
        } catch let error as AppdError {
            throw AppdError(
                .unsupported, "cannot ask systemd for a scope: \(error.message)",
                hint: "--systemd-cgroup needs systemd (and its busctl) on the host")
        }
        guard result.status == 0 && !result.timedOut else {
            throw AppdError(
                .unsupported,
                "systemd refused \(method) for \(arguments.first ?? ""): "
                    + result.output.split(separator: "\n").joined(separator: " "))
        }
    }
}
