import CLinux
import Glibc
import LauncherProtocol

/// `appd-exec --template`: builds an app's shared namespaces (docs/launcher-protocol.md,
/// "Shared namespaces") from its profile: a mount namespace holding the app's root (without the
/// per-instance procfs, /dev/shm and devpts), sealed read-only where it is tmpfs, and the app's
/// network namespace (loopback up) and uts namespace (its hostname). Then it says `ready` on the
/// status fd and waits to be killed: the daemon opens `/proc/PID/ns/*` in between and keeps the
/// namespaces by fd, and every later launch of the same profile joins them instead of building
/// its own. No cgroup, no pid namespace, nothing runs in them.
enum Template {
    static func run(_ arguments: Arguments) throws -> Int32 {
        // The daemon that asked is the only reader: if it dies, nothing is left waiting.
        try sys(appd_set_pdeathsig(SIGKILL), "template", "cannot set PDEATHSIG")
        let bytes = try FileIO.readAll(arguments.profileFD, limit: 1 << 20, step: "profile")
        close(arguments.profileFD)
        let profile = try ProfileParser.parse(bytes)
        guard profile.buildsRoot, profile.imageRoot == nil, profile.namespaces.contains(.mount)
        else {
            throw LaunchFailure("template", "a template needs 'unshare mount' and 'root tmpfs'")
        }
        var flags = APPD_CLONE_NEWNS
        if profile.namespaces.contains(.net) { flags |= APPD_CLONE_NEWNET }
        if profile.namespaces.contains(.uts) { flags |= APPD_CLONE_NEWUTS }
        guard appd_unshare(flags) == 0 else {
            throw LaunchFailure("unshare", "cannot create the template's namespaces", errno: errno)
        }
        let mounts = Mounts(profile: profile, phase: .template)
        try mounts.build()
        try mounts.seal()
        try Network.setUp(profile)
        guard let statusFD = arguments.statusFD,
            FileIO.writeAll(statusFD, LauncherStatus.readyLine + "\n")
        else {
            throw LaunchFailure.system("template", "cannot write ready to the status fd")
        }
        while true { pause() }
    }
}
