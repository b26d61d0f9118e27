import CLinux
import Glibc

// appd-exec: builds the sandbox a profile describes and execs the app in it
// (docs/launcher-protocol.md, DESIGN.md "The launch path"). Single-threaded and synchronous by
// design: unshare and a seccomp filter without TSYNC rely on there being one thread. No
// Foundation, no Dispatch, no async.

/// The outer launcher: reads and checks everything, joins the cgroups, unshares, forks PID 1,
/// then waits for it, forwarding signals, and reports the app's status.
enum Launcher {
    static func main() -> Int32 {
        var statusFD: Int32?
        // The new root's directories get the modes the profile says, whatever the caller's
        // umask (appd runs with 077).
        umask(0o022)
        do {
            try ensureStandardDescriptors()
            try Signals.prepareLauncher()
            let arguments = try Arguments.parse(CommandLine.arguments, statusFD: &statusFD)
            let profileBytes = try FileIO.readAll(
                arguments.profileFD, limit: 1 << 20, step: "profile")
            close(arguments.profileFD)
            let filterBytes = try FileIO.readAll(
                arguments.seccompFD,
                limit: SeccompProgram.maximumInstructions * SeccompProgram.instructionSize + 1,
                step: "seccomp")
            close(arguments.seccompFD)
            let profile = try ProfileParser.parse(profileBytes)
            let seccomp = try SeccompProgram(filterBytes, required: profile.seccompRequired)
            let lastCapability = Credentials.lastCapability()

            try Namespaces.joinCgroups(profile.cgroups)
            try Namespaces.unshare(profile)
            let outcome = try runInit(
                Launch(
                    profile: profile, seccomp: seccomp, report: Report(fd: -1),
                    lastCapability: lastCapability, launcherPidfd: -1,
                    channelFD: arguments.channelFD ?? -1))
            switch outcome {
            case .ended(let status):
                if let statusFD { FileIO.writeAll(statusFD, status.line + "\n") }
                return status.launcherCode
            case .failed(let text):
                return fail(text, statusFD: statusFD)
            }
        } catch {
            return fail(failureText(error), statusFD: statusFD)
        }
    }

    /// Forks PID 1 with the report pipe, waits for it and reads what it and the app process
    /// reported.
    private static func runInit(_ template: Launch) throws -> Outcome {
        var launch = template
        var pipeFDs: [Int32] = [-1, -1]
        try sys(appd_pipe_cloexec(&pipeFDs), "fork", "cannot create the report pipe")
        launch.report = Report(fd: pipeFDs[1])
        launch.launcherPidfd = appd_pidfd_open(getpid(), 0)  // -1 is fine: the check is skipped

        let child = fork()
        try sys(child, "fork", "cannot fork PID 1")
        if child == 0 {
            close(pipeFDs[0])
            Init.run(launch)
        }
        close(pipeFDs[1])
        if launch.launcherPidfd >= 0 { close(launch.launcherPidfd) }
        // Only the app holds the channel: the daemon sees it close when the app is gone.
        if launch.channelFD >= 0 { close(launch.channelFD) }

        let initStatus = Signals.supervise(child)
        // Everything that could write is gone: PID 1 exited, and the app process either
        // exec'd (closing its end) or was killed with the namespace.
        let report = (try? FileIO.readAll(pipeFDs[0], limit: 1 << 16, step: "report")) ?? []
        close(pipeFDs[0])
        return Outcome(report: report, initStatus: initStatus)
    }

    /// A closed 0, 1 or 2 would be reused by the next open or pipe and handed to the app as
    /// its stdin, stdout or stderr.
    private static func ensureStandardDescriptors() throws {
        for fd: Int32 in 0...2 where fcntl(fd, F_GETFD) < 0 {
            let opened = open("/dev/null", O_RDWR)
            try sys(opened, "arguments", "fd \(fd) is closed and /dev/null cannot be opened")
        }
    }

    private static func fail(_ text: String, statusFD: Int32?) -> Int32 {
        FileIO.writeAll(2, "appd-exec: \(text)\n")
        if let statusFD { FileIO.writeAll(statusFD, "error \(text)\n") }
        return 127
    }
}

exit(Launcher.main())
