import AppdBase
import CLinux
import Glibc

extension SandboxLaunch {
    /// Attaches the bind filter (CLinux's appd_cgroup_deny_port_binds) to the instance's
    /// cgroup v2 directory: every process of the instance, whatever it forks, is in it, and the
    /// filter goes with the cgroup when the instance ends. On a hybrid host that is the
    /// instance's directory below the `unified` hierarchy. Returns the filter's counter of
    /// refused binds (a BPF map fd, close-on-exec) for the denial log.
    static func denyPortBinds(in cgroup: any InstanceCgroup) throws -> Int32 {
        guard let directory = cgroup.directories.first(where: isCgroup2) else {
            throw AppdError(
                .unsupported,
                "refusing to launch: \(cgroup) has no cgroup v2 directory to attach the bind filter of network.client apps to",
                hint: "mount cgroup2 (unified or hybrid layout)")
        }
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw AppdError.system("open \(directory)") }
        defer { close(fd) }
        let counter = appd_cgroup_deny_port_binds(fd)
        guard counter >= 0 else {
            throw AppdError.system(
                "attach the bind filter of network.client apps to \(directory)",
                hint:
                    "cgroup socket programs need CONFIG_CGROUP_BPF=y, and appd needs CAP_SYS_ADMIN and "
                    + "CAP_NET_ADMIN; in a container the bpf system call may be filtered (systemd-nspawn: "
                    + "--system-call-filter=bpf)")
        }
        return counter
    }

    /// Attaches the loopback guard (CLinux's appd_cgroup_guard_loopback) to the instance's
    /// cgroup v2 directory, as the bind filter: the app reaches the host's loopback only on
    /// `ports`, and its own sockets there. Returns the guard's counter of refusals.
    static func guardLoopback(in cgroup: any InstanceCgroup, allowing ports: [UInt16]) throws
        -> Int32
    {
        guard let directory = cgroup.directories.first(where: isCgroup2) else {
            throw AppdError(
                .unsupported,
                "refusing to launch: \(cgroup) has no cgroup v2 directory to attach the loopback guard of apps on the host's network to",
                hint: "mount cgroup2 (unified or hybrid layout)")
        }
        guard ports.count <= Int(APPD_LOOPBACK_PORTS_MAX) else {
            throw AppdError(
                .invalidConfig,
                "LoopbackPorts= lists \(ports.count) ports; at most \(APPD_LOOPBACK_PORTS_MAX)")
        }
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw AppdError.system("open \(directory)") }
        defer { close(fd) }
        let counter = ports.withUnsafeBufferPointer {
            appd_cgroup_guard_loopback(fd, $0.baseAddress, Int32($0.count), loopbackTag())
        }
        guard counter >= 0 else {
            throw AppdError.system(
                "attach the loopback guard of apps on the host's network to \(directory)",
                hint:
                    "cgroup socket programs need CONFIG_CGROUP_BPF=y (and bpf_sk_lookup, Linux 5.2), and appd "
                    + "needs CAP_SYS_ADMIN and CAP_NET_ADMIN; in a container the bpf system call may be filtered "
                    + "(systemd-nspawn: --system-call-filter=bpf)")
        }
        return counter
    }

    /// The sk_priority the guard tags an instance's sockets with: its own, random; above 6, so
    /// no app can set it (SO_PRIORITY above 6 needs CAP_NET_ADMIN). A class-id major of
    /// 0x4000-0x7FFF, which neither tc's automatic handles (0x8000 up) nor the usual hand-picked
    /// ones use, and priority band bits 0, so no qdisc classifies the app's traffic by it.
    static func loopbackTag() -> UInt32 {
        UInt32.random(in: 0x4000...0x7FFF) << 16 | UInt32.random(in: 0...0xFFF) << 4
    }

    static func isCgroup2(_ path: String) -> Bool { appd_is_cgroup2(path) == 1 }
}
