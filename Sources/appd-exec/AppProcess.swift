import CLinux
import Glibc

/// The app process, PID 1's child: gives up everything the profile does not grant, step by
/// step in the order of the launch path, then execs the app. Any failure ends it with 127
/// before execve, so the app never runs partly confined.
enum AppProcess {
    static func run(_ launch: Launch) -> Never {
        // The report pipe may move (placeChannel): failures go wherever it is now.
        var launch = launch
        do {
            try confineAndExec(&launch)
        } catch {
            launch.report.fail(error)
        }
    }

    private static func confineAndExec(_ launch: inout Launch) throws -> Never {
        let profile = launch.profile
        let parent = getppid()
        // PID 1 dying takes the namespace with it, but without a pid namespace only this
        // notices. Re-armed below: setresuid clears it.
        try sys(appd_set_pdeathsig(SIGKILL), "pdeathsig", "cannot set PDEATHSIG")
        try Signals.resetForApp()
        try sys(setsid(), "setsid", "cannot start a session")
        if profile.console && isatty(0) != 0 {
            // Best effort: the terminal on fd 0 becomes the session's controlling terminal, so
            // the app gets job control; a terminal owned by another session stays as it is.
            _ = ioctl(0, UInt(TIOCSCTTY), 0)
        }
        // Before the app's rlimits and credentials: the wait is appd's, not the app's.
        if launch.startFD >= 0 { try waitAtStartGate(launch) }
        if let map = profile.userNamespace {
            // A plain OCI container: its own user namespace's root (UserNamespace).
            try UserNamespace.confine(launch, map: map)
        } else {
            try Credentials.applyResourceLimits(profile.rlimits)
            // Nothing the app creates is for others; its group (its own gid, or an application
            // group's setgid container) may share it.
            umask(0o007)
            try Credentials.dropBoundingSet(lastCapability: launch.lastCapability)
            // validate() guarantees uid and gid.
            try Credentials.switchIdentity(
                uid: profile.uid ?? 0, gid: profile.gid ?? 0, groups: profile.groups ?? [])
        }
        try sys(appd_set_pdeathsig(SIGKILL), "pdeathsig", "cannot re-arm PDEATHSIG")
        if getppid() != parent { _exit(127) }  // PID 1 died before PDEATHSIG was re-armed
        if profile.userNamespace == nil {
            try sys(appd_set_no_new_privs(), "no_new_privs", "cannot set no_new_privs")
        }
        let directory = profile.directory ?? "/"
        try sys(chdir(directory), "chdir", directory)
        if launch.channelFD >= 0 { try placeChannel(&launch) }
        try closeInheritedDescriptors(
            keeping: launch.report.fd, from: launch.channelFD >= 0 ? 4 : 3)

        // The exec arguments are built before Landlock and seccomp: after seccomp nothing but
        // execve should be left to do.
        guard let executable = profile.executable else {
            throw LaunchFailure("exec", "no exec record")
        }
        let argv = cStrings(profile.arguments)
        let envp = cStrings(profile.environment)

        if profile.userNamespace == nil {
            if profile.refuseExecGain {
                // Inherited by what the app forks and kept across its exec: the dynamic loader
                // maps each segment with its final protection, so only code that writes code is
                // refused.
                try sys(appd_set_mdwe_refuse_exec_gain(), "mdwe", "cannot set PR_SET_MDWE")
            }
            try Landlock.apply(profile)
            try launch.seccomp.install(logDenials: profile.logDenials)
        }
        execve(executable, argv, envp)
        throw LaunchFailure.system("execve", executable)
    }

    /// appd-oci's created state (docs/oci-runtime.md): the sandbox is built, the app is not
    /// running. Says `ready`, then reads one byte from the start gate, a FIFO appd-oci opened
    /// read-write (so that the read waits for data rather than seeing no writer): `appd-oci
    /// start` writes it. Only then does the process drop its credentials, apply Landlock and
    /// seccomp and exec; a signal meanwhile ends it with its default action.
    private static func waitAtStartGate(_ launch: Launch) throws {
        guard FileIO.writeAll(launch.readyFD, "ready\n") else {
            throw LaunchFailure.system("start", "cannot say ready to appd-oci")
        }
        close(launch.readyFD)
        var byte: UInt8 = 0
        var count: Int
        repeat { count = read(launch.startFD, &byte, 1) } while count < 0 && errno == EINTR
        close(launch.startFD)
        guard count == 1 else { throw LaunchFailure.system("start", "the start gate closed") }
    }

    /// The lifecycle channel becomes fd 3, where `APPD_LIFECYCLE_FD` says it is. The report
    /// pipe may sit on 3 (the lowest free fd when it was made): it moves up first.
    private static func placeChannel(_ launch: inout Launch) throws {
        if launch.report.fd == 3 {
            let moved = fcntl(3, F_DUPFD_CLOEXEC, 4)
            try sys(moved, "channel", "cannot move the report pipe off fd 3")
            launch.report = Report(fd: moved)
        }
        if launch.channelFD == 3 {
            try sys(
                fcntl(3, F_SETFD, 0), "channel",
                "cannot keep the lifecycle channel open across exec")
        } else {
            // dup2 leaves the copy without close-on-exec; the original is closed below.
            try sys(
                dup2(launch.channelFD, 3), "channel", "cannot place the lifecycle channel on fd 3")
        }
    }

    /// Closes everything from `first` (3, or 4 above the channel) but the report pipe, which
    /// stays open (it is close-on-exec) so that a failure in the last steps can still be reported.
    private static func closeInheritedDescriptors(keeping report: Int32, from first: UInt32) throws
    {
        let report = UInt32(report)
        if report > first {
            try sys(
                appd_close_range(first, report - 1), "close_range", "fds \(first)-\(report - 1)")
        }
        try sys(
            appd_close_range(max(report + 1, first), UInt32.max), "close_range",
            "fds above \(report)")
    }

    /// A NULL-terminated array of C strings for execve. Never freed: execve replaces the process.
    /// A raw allocation, not an Array: `[UnsafeMutablePointer<CChar>?]` is a generic type the
    /// runtime would instantiate (swift_getTypeByMangledName) on every launch.
    private static func cStrings(_ strings: [String]) -> UnsafeMutablePointer<
        UnsafeMutablePointer<CChar>?
    > {
        let array = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(
            capacity: strings.count + 1)
        for (index, string) in strings.enumerated() { array[index] = strdup(string) }
        array[strings.count] = nil
        return array
    }
}
