import CLinux
import Glibc

/// The first two steps of the launch path, in the outer launcher: join the instance's cgroups,
/// then create the namespaces. Both happen before the fork so that PID 1 and the app are born
/// inside them.
enum Namespaces {
    /// Moves us into each `cgroup.procs`'s cgroup: the supervisor created the cgroups, we move
    /// in before anything else so that every process of the sandbox is accounted for. In a v1
    /// hierarchy this single-threaded process moves its one thread, writing 0 to `tasks`: a
    /// pid written to `cgroup.procs` makes the kernel lock every thread group (it skips that
    /// lock only for a thread moving itself: cgroup_procs_write_start), and taking it waits for
    /// an RCU grace period, 10-20 ms here, unless a move came just before. Cgroup v2 has no `tasks` (the
    /// launcher was born in its v2 directory, which is then not listed here).
    static func joinCgroups(_ paths: [String]) throws {
        for path in paths {
            guard path.hasSuffix("/cgroup.procs") else {
                try move(getpid(), into: [path], "cannot join")
                continue
            }
            let tasks = String(path.dropLast("cgroup.procs".count)) + "tasks"
            let fd = open(tasks, O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else {
                try move(getpid(), into: [path], "cannot join")
                continue
            }
            defer { close(fd) }
            guard FileIO.writeAll(fd, "0") else {
                throw LaunchFailure.system("cgroup", "cannot join \(tasks)")
            }
        }
    }

    /// Writes `process` to each `cgroup.procs` in `paths`; `failure` begins the message.
    static func move(_ process: pid_t, into paths: [String], _ failure: String) throws {
        let pid = "\(process)\n"
        for path in paths {
            let fd = open(path, O_WRONLY | O_CLOEXEC)
            try sys(fd, "cgroup", "cannot open \(path)")
            defer { close(fd) }
            guard FileIO.writeAll(fd, pid) else {
                throw LaunchFailure.system("cgroup", "\(failure) \(path)")
            }
        }
    }

    /// unshare(2) in this single-threaded process. The pid namespace applies to the children
    /// only: the next fork creates its PID 1. With `joined` (the app's shared namespaces, built
    /// by `--template`), the launcher first enters the template's mount namespace, whose root
    /// is the app's root already, then unshares a private copy of it with the other
    /// namespaces, and joins the app's network and uts namespaces instead of creating them.
    static func unshare(_ profile: Profile, joined: JoinedNamespaces? = nil) throws {
        var flags = profile.unshareFlags
        if let joined, joined.mount >= 0 {
            guard profile.namespaces.contains(.mount), profile.buildsRoot, profile.imageRoot == nil
            else {
                throw LaunchFailure(
                    "unshare", "--mount-ns-fd needs 'unshare mount' and 'root tmpfs'")
            }
            try enter(joined.mount, APPD_CLONE_NEWNS, "mount")
            // setns leaves us at the namespace's own root, which is the template's only when
            // appd is not chrooted: enter the template's root by its fd. The unshare below
            // moves root and working directory to their copies.
            guard fchdir(joined.root) == 0, chroot(".") == 0 else {
                throw LaunchFailure(
                    "unshare", "cannot enter the app's shared root (fd \(joined.root))",
                    errno: errno)
            }
        }
        if let joined {
            try joinInstead(joined.net, .net, &flags, profile)
            try joinInstead(joined.uts, .uts, &flags, profile)
            try joinInstead(joined.ipc, .ipc, &flags, profile)
            try joinInstead(joined.pid, .pid, &flags, profile)
        }
        try unshare(flags, profile)
        if let joined {
            if joined.net >= 0 { try enter(joined.net, APPD_CLONE_NEWNET, "net") }
            if joined.uts >= 0 { try enter(joined.uts, APPD_CLONE_NEWUTS, "uts") }
            if joined.ipc >= 0 { try enter(joined.ipc, APPD_CLONE_NEWIPC, "ipc") }
            // The next fork's child is a process of the pod's pid namespace, not its PID 1.
            if joined.pid >= 0 { try enter(joined.pid, APPD_CLONE_NEWPID, "pid") }
            joined.close()
        }
    }

    /// `appd-oci exec`: enters every namespace the profile names of a running sandbox's
    /// process (`pidfd`, its PID 1) at once, with setns(2) on the pidfd (Linux 5.8): its
    /// mount namespace puts the launcher at the sandbox's root, its pid namespace takes the
    /// next fork. Nothing is created or mounted.
    static func enter(pidfd: Int32, _ profile: Profile) throws {
        guard profile.namespaces.contains(.mount), profile.namespaces.contains(.pid) else {
            throw LaunchFailure("unshare", "--enter-fd needs 'unshare mount' and 'unshare pid'")
        }
        guard appd_setns(pidfd, profile.unshareFlags) == 0 else {
            let code = errno
            let hint = code == EINVAL ? "; hint: a kernel before 5.8 cannot setns a pidfd" : ""
            throw LaunchFailure(
                "unshare", "cannot enter the container's namespaces\(hint)", errno: code)
        }
        close(pidfd)
    }

    /// setns(2) into a namespace the daemon holds; the fd's type must match `type`.
    /// `fd` (-1: none) is joined after the unshare instead of a new `namespace` made: the
    /// profile must unshare it, and its flag leaves `flags`.
    private static func joinInstead(
        _ fd: Int32, _ namespace: Namespace, _ flags: inout Int32, _ profile: Profile
    ) throws {
        guard fd >= 0 else { return }
        guard profile.namespaces.contains(namespace) else {
            let name = namespace.rawValue
            throw LaunchFailure("unshare", "--\(name)-ns-fd needs 'unshare \(name)'")
        }
        flags &= ~namespace.cloneFlag
    }

    private static func enter(_ fd: Int32, _ type: Int32, _ name: String) throws {
        guard appd_setns(fd, type) == 0 else {
            let code = errno
            let hint = code == EINVAL ? "; hint: fd \(fd) is not a \(name) namespace" : ""
            throw LaunchFailure(
                "unshare", "cannot join the app's \(name) namespace\(hint)", errno: code)
        }
    }

    private static func unshare(_ flags: Int32, _ profile: Profile) throws {
        guard flags != 0 else { return }
        guard appd_unshare(flags) == 0 else {
            let code = errno
            let names = profile.namespaces.map { $0.rawValue }.joined(separator: " ")
            let hint = code == EPERM ? "; hint: appd-exec must run as root" : ""
            throw LaunchFailure("unshare", "cannot create namespaces \(names)\(hint)", errno: code)
        }
    }
}

/// The app's shared namespaces (docs/launcher-protocol.md, "Shared namespaces"): a mount
/// namespace holding the app's root without /proc and /dev's per-instance mounts, that root's
/// directory, and its network and uts namespaces (-1: not shared).
struct JoinedNamespaces {
    var mount: Int32
    /// The template's root directory, entered after joining `mount`.
    var root: Int32
    var net: Int32
    var uts: Int32
    /// A pod's ipc and pid namespaces (appd-oci, by path); -1: not joined.
    var ipc: Int32 = -1
    var pid: Int32 = -1

    func close() {
        // Not a loop over an array literal: `[Int32]` is a runtime metadata lookup per launch.
        if mount >= 0 { _ = Glibc.close(mount) }
        if root >= 0 { _ = Glibc.close(root) }
        if net >= 0 { _ = Glibc.close(net) }
        if uts >= 0 { _ = Glibc.close(uts) }
        if ipc >= 0 { _ = Glibc.close(ipc) }
        if pid >= 0 { _ = Glibc.close(pid) }
    }
}
