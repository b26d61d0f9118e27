import CLinux
import Glibc

/// The first two steps of the launch path, in the outer launcher: join the instance's cgroups,
/// then create the namespaces. Both happen before the fork so that PID 1 and the app are born
/// inside them.
enum Namespaces {
    /// Writes our pid to each `cgroup.procs`: the supervisor created the cgroups, we move in
    /// before anything else so that every process of the sandbox is accounted for.
    static func joinCgroups(_ paths: [String]) throws {
        let pid = "\(getpid())\n"
        for path in paths {
            let fd = open(path, O_WRONLY | O_CLOEXEC)
            try sys(fd, "cgroup", "cannot open \(path)")
            defer { close(fd) }
            guard FileIO.writeAll(fd, pid) else {
                throw LaunchFailure.system("cgroup", "cannot join \(path)")
            }
        }
    }

    /// unshare(2) in this single-threaded process. The pid namespace applies to the children
    /// only: the next fork creates its PID 1.
    static func unshare(_ profile: Profile) throws {
        let flags = profile.unshareFlags
        guard flags != 0 else { return }
        guard appd_unshare(flags) == 0 else {
            let code = errno
            let names = profile.namespaces.map { $0.rawValue }.joined(separator: " ")
            let hint = code == EPERM ? "; hint: appd-exec must run as root" : ""
            throw LaunchFailure("unshare", "cannot create namespaces \(names)\(hint)", errno: code)
        }
    }
}
