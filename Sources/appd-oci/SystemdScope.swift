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

    private static func limitProperties(_ limits: CgroupLimits) -> [[String]] {
        var properties: [[String]] = []
        if let memory = limits.memoryMax { properties.append(["MemoryMax", "t", String(memory)]) }
        if let pids = limits.pidsMax { properties.append(["TasksMax", "t", String(pids)]) }
        if let weight = limits.cpuWeight { properties.append(["CPUWeight", "t", String(weight)]) }
        return properties
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
