import AppBundle
import CLinux
import Glibc
import Sandbox

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
                hint: "cgroup socket programs need CONFIG_CGROUP_BPF=y, and appd needs CAP_SYS_ADMIN and "
                    + "CAP_NET_ADMIN; in a container the bpf system call may be filtered (systemd-nspawn: "
                    + "--system-call-filter=bpf)")
        }
        return counter
    }

    static func isCgroup2(_ path: String) -> Bool { appd_is_cgroup2(path) == 1 }
}
