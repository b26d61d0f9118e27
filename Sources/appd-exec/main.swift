import CLinux
import Glibc
import LauncherProtocol

// appd-exec: builds the sandbox a profile describes and execs the app in it
// (docs/launcher-protocol.md, docs/launch-path.md). Single-threaded and synchronous by
// design: unshare and a seccomp filter without TSYNC rely on there being one thread. No
// Foundation, no Dispatch, no async.

/// The outer launcher: reads and checks everything, joins the cgroups, unshares, forks PID 1,
/// then waits for it, forwarding signals, and reports the app's status.
enum Launcher {
    static func main() -> Int32 {
        var statusFD: Int32?
        var relay: pid_t?
        // The new root's directories get the modes the profile says, whatever the caller's
        // umask (appd runs with 077).
        umask(0o022)
        do {
            try ensureStandardDescriptors()
            try Signals.prepareLauncher()
            let arguments = try Arguments.parse(CommandLine.arguments, statusFD: &statusFD)
            if arguments.template { return try Template.run(arguments) }
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
            if let uid = profile.uid { AuditSession.begin(uid: uid) }
            if let output = arguments.output {
                // In the instance's cgroups, before unshare: the relay stays in the host's
                // namespaces (docs/app-output.md). Nothing after it holds the read end.
                // Born out of the app's leaf: a suspend never freezes it.
                relay = try OutputRelay.start(
                    output, cgroups: profile.relayCgroups, lastCapability: lastCapability)
                // One by one: an array of them would be one more type the runtime instantiates.
                if output.readFD >= 0 { close(output.readFD) }
                if output.logDirectoryFD >= 0 { close(output.logDirectoryFD) }
                if output.journalFD >= 0 { close(output.journalFD) }
            }
            // Before the pid namespace is unshared: its child must be the host's, seen in /proc.
            var idmap: Int32 = -1
            if profile.imageRoot != nil, arguments.enterFD < 0, let map = profile.userNamespace {
                idmap = appd_mapping_userns(map.uid, map.gid, map.count)
                try sys(idmap, "root", "cannot make the user namespace of the rootfs's idmapping")
            }
            if arguments.enterFD >= 0 {
                try Namespaces.enter(pidfd: arguments.enterFD, profile)
            } else {
                try Namespaces.unshare(profile, joined: arguments.joined)
            }
            let outcome = try runInit(
                Launch(
                    profile: profile, seccomp: seccomp, report: Report(fd: -1),
                    lastCapability: lastCapability, launcherPidfd: -1,
                    channelFD: arguments.channelFD ?? -1, joined: arguments.joined,
                    readyFD: arguments.readyFD, startFD: arguments.startFD,
                    entered: arguments.enterFD >= 0, initSignals: arguments.initSignals,
                    idmapUserNamespace: idmap))
            switch outcome {
            case .ended(let status):
                finishOutput(relay)
                if let statusFD { FileIO.writeAll(statusFD, status.line + "\n") }
                return status.launcherCode
            case .failed(let text):
                return fail(text, statusFD: statusFD, relay: relay)
            }
        } catch {
            return fail(failureText(error), statusFD: statusFD, relay: relay)
        }
    }

    /// The app is gone: the launcher lets go of its copies of the pipe's write end (its 1 and 2)
    /// so that the relay reads EOF, then waits for the relay to write the rest, so that "the
    /// instance ended" implies "its output is in the log". Bounded: a writer that escaped the
    /// pid namespace (none can, with one) must not hold the status back; the daemon's
    /// cgroup.kill ends a relay still waiting for it.
    private static func finishOutput(_ relay: pid_t?) {
        guard let relay else { return }
        let null = devNull >= 0 ? devNull : open("/dev/null", O_RDWR | O_CLOEXEC)
        if null >= 0 {
            dup2(null, 1)
            dup2(null, 2)
            close(null)
            devNull = -1
        }
        // Waited for through a pidfd, not by polling: the relay ends within a fraction of a
        // millisecond of the EOF, and a 10 ms sleep here was most of the time between the app's
        // exit and the daemon learning of it (issue 15). The pidfd is opened only while the
        // relay is our unreaped child, so its pid cannot have been reused.
        var status: Int32 = 0
        let first = waitpid(relay, &status, WNOHANG)
        // ECHILD: reaped already by the supervising loop (it ended before the app).
        if first == relay || (first < 0 && errno != EINTR) { return }
        let pidfd = appd_pidfd_open(relay, 0)
        if pidfd >= 0 {
            defer { close(pidfd) }
            var start = timespec()
            clock_gettime(CLOCK_MONOTONIC, &start)
            while true {
                var now = timespec()
                clock_gettime(CLOCK_MONOTONIC, &now)
                let elapsed =
                    (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1_000_000
                let left = 5000 - elapsed
                if left <= 0 { break }
                var entry = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
                let ready = poll(&entry, 1, Int32(left))
                if ready > 0 || (ready < 0 && errno != EINTR) { break }
                if ready == 0 { break }
            }
            _ = waitpid(relay, &status, WNOHANG)
            return
        }
        // No pidfd (a kernel before 5.3): the same bound, polled.
        for _ in 0..<5000 {
            let result = waitpid(relay, &status, WNOHANG)
            if result == relay || (result < 0 && errno != EINTR) { return }
            usleep(1000)
        }
    }

    /// /dev/null, opened before the launcher gives up its privileges (finishOutput needs it).
    nonisolated(unsafe) private static var devNull: Int32 = -1

    /// The launcher gives up the host's privileges once PID 1 is forked (Helpers). It cannot:
    /// PID 1 and the app are killed, and the launch fails.
    private static func confine(pid1: pid_t, _ launch: Launch) -> Outcome? {
        do {
            try Helpers.confineLauncher(pid1: pid1, lastCapability: launch.lastCapability)
            return nil
        } catch {
            kill(pid1, SIGKILL)
            _ = Signals.supervise(pid1)
            return .failed(failureText(error))
        }
    }

    /// Forks PID 1 with the report pipe, waits for it and reads what it and the app process
    /// reported.
    private static func runInit(_ template: Launch) throws -> Outcome {
        var launch = template
        // A tuple, not an [Int32]: no array type for the runtime to instantiate.
        var pipeFDs: (read: Int32, write: Int32) = (-1, -1)
        let piped = withUnsafeMutableBytes(of: &pipeFDs) {
            appd_pipe_cloexec($0.baseAddress!.assumingMemoryBound(to: Int32.self))
        }
        try sys(piped, "fork", "cannot create the report pipe")
        launch.report = Report(fd: pipeFDs.write)
        launch.launcherPidfd = appd_pidfd_open(getpid(), 0)  // -1 is fine: the check is skipped

        let child = fork()
        try sys(child, "fork", "cannot fork PID 1")
        if child == 0 {
            close(pipeFDs.read)
            Init.run(launch)
        }
        close(pipeFDs.write)
        // Opened while it still may: after the confinement below the launcher opens nothing.
        if devNull < 0 { devNull = open("/dev/null", O_RDWR | O_CLOEXEC) }
        if let failure = confine(pid1: child, launch) { return failure }
        if launch.launcherPidfd >= 0 { close(launch.launcherPidfd) }
        if launch.idmapUserNamespace >= 0 { close(launch.idmapUserNamespace) }
        // Only the app holds the channel: the daemon sees it close when the app is gone.
        if launch.channelFD >= 0 { close(launch.channelFD) }
        // Only the app process says ready (appd-oci reads EOF if the launch fails).
        if launch.readyFD >= 0 { close(launch.readyFD) }
        if launch.startFD >= 0 { close(launch.startFD) }

        let initStatus = Signals.supervise(child)
        // Everything that could write is gone: PID 1 exited, and the app process either
        // exec'd (closing its end) or was killed with the namespace.
        let report = (try? FileIO.readAll(pipeFDs.read, limit: 1 << 16, step: "report")) ?? []
        close(pipeFDs.read)
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

    private static func fail(_ text: String, statusFD: Int32?, relay: pid_t? = nil) -> Int32 {
        FileIO.writeAll(2, "appd-exec: \(text)\n")
        finishOutput(relay)
        if let statusFD { FileIO.writeAll(statusFD, LauncherStatus.failed(text).line + "\n") }
        return 127
    }
}

exit(Launcher.main())
