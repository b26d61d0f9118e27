import CLinux
import Glibc

/// Everything the processes after the fork need, prepared by the outer launcher.
struct Launch {
    var profile: Profile
    var seccomp: SeccompProgram
    var report: Report
    var lastCapability: Int32
    /// A pidfd of the outer launcher, for PID 1 to check it did not die before PDEATHSIG was set.
    var launcherPidfd: Int32
    /// The app's end of the lifecycle channel, or -1: the app gets it as fd 3.
    var channelFD: Int32
    /// The app's shared namespaces the launcher joined (their fds are closed by now): the root,
    /// the loopback and the hostname are there already.
    var joined: JoinedNamespaces? = nil
    /// appd-oci's created state (-1: none): the pipe to say `ready` on and the start gate.
    var readyFD: Int32 = -1
    var startFD: Int32 = -1
    /// `appd-oci exec`: the launcher entered a running sandbox's namespaces; its root, mounts
    /// and network are built already, and its PID 1 is another process.
    var entered = false
    /// Forward a signal to the app only if it handles it (`--init-signals`).
    var initSignals = false
    /// `root image`: the user namespace describing the rootfs's idmapping, made by the outer
    /// launcher (which sees its child in its procfs), or -1. The app process enters it too.
    var idmapUserNamespace: Int32 = -1
}

/// PID 1 of the new pid namespace: builds the root, sets up the network, forks the app and
/// then only reaps, forwards signals, and reports how the app ended. When it exits the kernel
/// kills whatever is left in the namespace.
enum Init {
    static func run(_ launch: Launch) -> Never {
        do {
            let status = try start(launch)
            launch.report.send(status.line)
            _exit(status.launcherCode & 0xFF)
        } catch {
            launch.report.fail(error)
        }
    }

    private static func start(_ launch: Launch) throws -> ExitStatus {
        let profile = launch.profile
        try sys(appd_set_pdeathsig(SIGKILL), "init", "cannot set PDEATHSIG")
        if launch.launcherPidfd >= 0 {
            // The launcher may have died between fork and PDEATHSIG: then nobody waits for us.
            if appd_pidfd_exited(launch.launcherPidfd) != 0 { _exit(127) }
        }
        if !profile.namespaces.contains(.pid) || launch.entered {
            // Not PID 1, so orphans would escape to the host's init: adopt them instead.
            try sys(appd_set_child_subreaper(), "init", "cannot become a subreaper")
        }
        // Out of the launcher's process group: a Ctrl-C on the terminal reaches the launcher,
        // which forwards it, and would otherwise reach us a second time.
        setsid()

        if launch.entered {
            // The sandbox's own PID 1 built all of it, and its memfd setting holds for us.
        } else if let joined = launch.joined, joined.mount >= 0 {
            try Mounts(profile: profile).mountInstanceParts()
        } else if profile.buildsRoot {
            try Mounts(profile: profile, idmapUserNamespace: launch.idmapUserNamespace).build()
        }
        if !launch.entered {
            try Network.setUp(profile, joined: launch.joined)
            if profile.memfdNoexec { try denyExecutableMemfds(profile) }
            for sysctl in profile.sysctls { try write(sysctl: sysctl.name, sysctl.value) }
            if profile.buildsRoot && launch.joined == nil {
                try Mounts(profile: profile).restrictPaths()
            }
        }

        // The app process shares PID 1's memory until it execs, PID 1 suspended meanwhile
        // (vfork semantics, as posix_spawn): a fork copied PID 1's page tables, and both then
        // took a copy-on-write fault on every page they wrote. What the app process sets up is
        // its own either way: credentials, seccomp, Landlock, PDEATHSIG, rlimits, the session,
        // signal dispositions, its fd table, umask and working directory. What it allocates
        // stays in PID 1's heap, unused.
        var shared = launch
        let app = withUnsafeMutablePointer(to: &shared) { pointer in
            appd_spawn_shared(
                { AppProcess.run($0!.assumingMemoryBound(to: Launch.self).pointee) }, pointer)
        }
        try sys(app, "fork", "cannot fork the app process")
        if launch.channelFD >= 0 { close(launch.channelFD) }
        // Only the app process says ready: its end closing tells appd-oci the launch failed.
        if launch.readyFD >= 0 { close(launch.readyFD) }
        if launch.startFD >= 0 { close(launch.startFD) }
        if launch.idmapUserNamespace >= 0 { close(launch.idmapUserNamespace) }
        do {
            try Helpers.confineInit(app: app, launch, parentPidfd: launch.launcherPidfd)
        } catch {
            kill(app, SIGKILL)
            _ = Signals.supervise(app)
            throw error
        }
        if launch.launcherPidfd >= 0 { close(launch.launcherPidfd) }
        return Signals.supervise(app, onlyHandled: launch.initSignals)
    }

    /// A namespaced sysctl (the parser allows no other), through the container's own procfs:
    /// its network and ipc namespaces are PID 1's.
    private static func write(sysctl name: String, _ value: String) throws {
        var path = "/proc/sys/"
        for byte in name.utf8 {
            path += byte == UInt8(ascii: ".") ? "/" : String(UnicodeScalar(byte))
        }
        let fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
        try sys(fd, "sysctl", "cannot open \(path)")
        defer { close(fd) }
        guard FileIO.writeAll(fd, value) else {
            throw LaunchFailure.system("sysctl", "cannot write \(name)")
        }
    }

    /// vm.memfd_noexec is kept per pid namespace and read from the writer's: written here, by
    /// PID 1 of the instance's own namespace through its own procfs, it holds for every process
    /// of the instance and for no one else. 2: memfd_create(MFD_EXEC) fails and every other memfd
    /// is sealed non-executable, so no memfd can be exec'd (Linux 6.3; the policy asks only where
    /// the kernel has it). Without a pid namespace of its own it would be the host's: refused.
    private static func denyExecutableMemfds(_ profile: Profile) throws {
        guard profile.namespaces.contains(.pid) else {
            throw LaunchFailure(
                "memfd-noexec", "needs the instance's own pid namespace (unshare pid)")
        }
        let path = "/proc/sys/vm/memfd_noexec"
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        try sys(fd, "memfd-noexec", "cannot open \(path)")
        defer { close(fd) }
        guard FileIO.writeAll(fd, "2\n") else {
            throw LaunchFailure.system("memfd-noexec", "cannot write \(path)")
        }
    }
}
