import AppdBase
import Glibc

extension SystemdScope {
    /// Refuses a `slice:prefix:name` cgroupsPath on a node where systemd is not the init
    /// system (sd_booted's test: `/run/systemd/system` exists), before anything is made: the
    /// scope could never be started, and the engine's setting is what must change. Without this
    /// the create failed late ("Failed to connect to bus") after making the slice's folders.
    static func requireSystemd(forPath path: String, root: String = "/") throws {
        var info = stat()
        guard stat(root + "run/systemd/system", &info) != 0 else { return }
        throw AppdError(
            .unsupported,
            "cgroupsPath \(path) asks for a systemd scope (the engine's systemd cgroup driver), but systemd is not running on this node",
            hint:
                "use the cgroupfs driver: containerd SystemdCgroup = false, podman cgroup_manager = \"cgroupfs\", docker native.cgroupdriver=cgroupfs, kubelet cgroupDriver: cgroupfs"
        )
    }
}
