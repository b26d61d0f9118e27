import CLinux
import Glibc

/// The launcher's helpers, the processes of an instance that are not the app: the outer
/// launcher (waits for PID 1, forwards signals, reports the status), PID 1 (reaps, forwards
/// signals to the app) and the output relay (writes the app's output to its log). Each gives up
/// the host's privileges for good as soon as its privileged work is done: no capability in the
/// host's user namespace, no way back to one, and a seccomp allowlist of its own that names the
/// one process it may signal (docs/launcher-protocol.md, "The helpers"). A helper that cannot
/// confine itself ends the launch.
enum Helpers {
    /// The outer launcher, once PID 1 is forked: what is left is waiting for it, forwarding
    /// signals to it and writing the status fd.
    static func confineLauncher(pid1: pid_t, lastCapability: Int32) throws {
        var confinement = appd_helper_confinement(
            kind: APPD_HELPER_LAUNCHER, last_capability: lastCapability, peer: pid1,
            directory_fd: -1, effective_uid: -1, user_namespace_pidfd: -1, read_only_opens: 0,
            pdeath_signal: 0, parent_pidfd: -1)
        try sys(appd_confine_helper(&confinement), "helpers", "cannot confine the launcher")
    }

    /// PID 1, once the app process is started: it forwards signals to the app as the app's
    /// effective uid, or, in a plain container with a user namespace, as that namespace's root
    /// (where the container's processes may take any id). `parentPidfd`: the outer launcher,
    /// checked after PDEATHSIG is armed again.
    static func confineInit(app: pid_t, _ launch: Launch, parentPidfd: Int32) throws {
        var namespacePidfd: Int32 = -1
        if launch.profile.userNamespace != nil {
            namespacePidfd = appd_pidfd_open(app, 0)
            try sys(namespacePidfd, "helpers", "cannot open a pidfd of the app process")
        }
        defer { if namespacePidfd >= 0 { close(namespacePidfd) } }
        var confinement = appd_helper_confinement(
            kind: APPD_HELPER_INIT, last_capability: launch.lastCapability, peer: app,
            directory_fd: -1, effective_uid: Int64(launch.profile.uid ?? 0),
            user_namespace_pidfd: namespacePidfd, read_only_opens: launch.initSignals ? 1 : 0,
            pdeath_signal: SIGKILL, parent_pidfd: parentPidfd)
        guard appd_confine_helper(&confinement) == 0 else {
            if errno == ESRCH { _exit(127) }  // the launcher died: nobody waits for us
            throw LaunchFailure.system("helpers", "cannot confine PID 1")
        }
    }

    /// The output relay, before its first read of the app's output: it keeps its log folder
    /// (Landlock: nothing else of any filesystem), its pipe, the journal socket and its lock.
    static func confineRelay(logDirectory: Int32, lastCapability: Int32) -> Bool {
        var confinement = appd_helper_confinement(
            kind: APPD_HELPER_RELAY, last_capability: lastCapability, peer: 0,
            directory_fd: logDirectory, effective_uid: -1, user_namespace_pidfd: -1,
            read_only_opens: 0, pdeath_signal: 0, parent_pidfd: -1)
        return appd_confine_helper(&confinement) == 0
    }
}
