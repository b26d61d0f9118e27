import AppBundle
import AppdBase
import CLinux
import Glibc

/// What this kernel offers the sandbox. Each check is one system call or one small read
/// under /proc or /sys; no subprocesses. `appd doctor` and `appd profile` print it.
public struct HostFeatures: Codable, Sendable, Equatable {
    public enum LandlockStatus: String, Codable, Sendable {
        case available
        /// The kernel has Landlock but it is not in the active LSM list (`lsm=` boot option).
        case disabledAtBoot
        /// The kernel was built without CONFIG_SECURITY_LANDLOCK.
        case notBuilt
        /// The probe failed some other way (e.g. a seccomp filter around appd refused it).
        case unknown
    }

    /// /proc/sys/kernel/osrelease, e.g. `6.18.0`.
    public var kernelRelease: String
    /// Landlock ABI version, 0 when unavailable.
    public var landlockABI: Int
    public var landlockStatus: LandlockStatus
    /// `prctl(PR_GET_SECCOMP)` works (CONFIG_SECCOMP).
    public var seccomp: Bool
    /// /proc/sys/kernel/seccomp/actions_avail (CONFIG_SECCOMP_FILTER), empty when missing.
    public var seccompActions: [String]
    /// /proc/sys/user/max_user_namespaces; nil when the file is missing (no CONFIG_USER_NS).
    public var maxUserNamespaces: Int?
    /// Debian's /proc/sys/kernel/unprivileged_userns_clone, when present.
    public var unprivilegedUserNamespaceClone: Bool?
    /// Ubuntu's kernel.apparmor_restrict_unprivileged_userns, when present.
    public var appArmorRestrictsUserNamespaces: Bool?
    /// Namespace kinds with an entry in /proc/self/ns (`user`, `pid`, `net`, `mnt`, ...).
    public var namespaces: [String]
    public var cgroups: CgroupLayout
    /// Controllers appd can use: on v2 those in its own cgroup's `cgroup.controllers` (what was
    /// delegated to it), on hybrid/legacy those mounted as v1 hierarchies.
    public var cgroupControllers: [String]
    /// The v2 tree offers `cgroup.freeze` (Linux 5.2) and `cgroup.kill` (Linux 5.14).
    public var cgroupFreeze: Bool
    public var cgroupKill: Bool
    /// pidfd_open(2) (Linux 5.3).
    public var pidfd: Bool

    /// The namespaces the launcher creates (docs/launch-path.md, "The launcher").
    public static let sandboxNamespaces = ["user", "pid", "net", "mnt", "ipc", "uts", "cgroup"]

    public var seccompFilter: Bool { seccomp && Self.filterActionsPresent(seccompActions) }

    /// The filter appd builds returns ERRNO and kills the process on a foreign ABI.
    static func filterActionsPresent(_ actions: [String]) -> Bool {
        actions.contains("errno") && actions.contains("kill_process")
    }

    static func landlockStatus(_ probe: Int32) -> LandlockStatus {
        switch probe {
        case 1...: .available
        case -EOPNOTSUPP: .disabledAtBoot
        case -ENOSYS: .notBuilt
        default: .unknown
        }
    }

    /// /proc/sys/kernel/seccomp/actions_avail (below `root`), empty when missing.
    static func seccompActions(root: String = "") -> [String] {
        (try? CgroupFS.read(root + "/proc/sys/kernel/seccomp/actions_avail").get())?
            .split(whereSeparator: \.isWhitespace).map(String.init) ?? []
    }

    public var userNamespaces: Bool {
        namespaces.contains("user") && (maxUserNamespaces ?? 0) > 0
    }

    /// Results of the probes that need a system call rather than a file, so tests can
    /// describe weak kernels. Each holds the call's result, or `-errno` when it failed.
    public struct SyscallProbes: Sendable, Equatable {
        public var landlockCreateRulesetVersion: Int32
        public var prctlGetSeccomp: Int32
        public var pidfdOpen: Int32

        public init(landlockCreateRulesetVersion: Int32, prctlGetSeccomp: Int32, pidfdOpen: Int32) {
            self.landlockCreateRulesetVersion = landlockCreateRulesetVersion
            self.prctlGetSeccomp = prctlGetSeccomp
            self.pidfdOpen = pidfdOpen
        }

        /// Runs the real probes on this kernel.
        public static func live() -> SyscallProbes {
            let landlock = appd_landlock_abi_version()
            let landlockResult = landlock >= 0 ? landlock : -errno
            let seccomp = appd_prctl_get_seccomp()
            let seccompResult = seccomp >= 0 ? seccomp : -errno
            let fd = appd_pidfd_open(getpid(), 0)
            let pidfdResult = fd >= 0 ? 0 : -errno
            if fd >= 0 { close(fd) }
            return SyscallProbes(
                landlockCreateRulesetVersion: landlockResult,
                prctlGetSeccomp: seccompResult, pidfdOpen: pidfdResult)
        }
    }

    /// Detects the running kernel; `root` prefixes /proc and /sys paths and `probes` replaces
    /// the system calls (tests feed fake trees describing weak kernels).
    public static func detect(root: String = "", probes: SyscallProbes = .live()) -> HostFeatures {
        func read(_ path: String) -> String? { try? CgroupFS.read(root + path).get() }
        func flag(_ path: String) -> Bool? {
            read(path).flatMap { Int($0.filter { !$0.isWhitespace }) }.map { $0 != 0 }
        }
        let landlock = probes.landlockCreateRulesetVersion
        let status = landlockStatus(landlock)
        let namespaces = ["user", "pid", "net", "mnt", "ipc", "uts", "cgroup", "time"].filter {
            CgroupFS.exists(root + "/proc/self/ns/" + $0)
        }
        let release = read("/proc/sys/kernel/osrelease")?.filter { !$0.isWhitespace } ?? ""
        let layout = CgroupLayout.detect(root: root)
        let v2Directory = layout.unified.flatMap { $0.ownDirectory ?? $0.mountPoint }
        // The root cgroup has neither file; look at our own cgroup or, at the root, a child.
        func v2File(_ name: String) -> Bool {
            guard let v2Directory, let unified = layout.unified else { return false }
            if CgroupFS.exists(v2Directory + "/" + name) { return true }
            let children = (try? directoryEntries(unified.mountPoint)) ?? []
            if let child = children.first {
                return CgroupFS.exists(unified.mountPoint + "/" + child + "/" + name)
            }
            // A bare root: go by the release that introduced the file.
            return kernelAtLeast(release, name == "cgroup.kill" ? (5, 14) : (5, 2))
        }
        var controllers: [String]
        if layout.mode == .unified, let v2Directory {
            controllers =
                read(String(v2Directory.dropFirst(root.count)) + "/cgroup.controllers")?
                .split(whereSeparator: \.isWhitespace).map(String.init) ?? []
        } else {
            controllers = layout.v1.flatMap(\.controllers)
        }
        return HostFeatures(
            kernelRelease: release,
            landlockABI: status == .available ? Int(landlock) : 0,
            landlockStatus: status,
            seccomp: probes.prctlGetSeccomp >= 0,
            seccompActions: seccompActions(root: root),
            maxUserNamespaces: read("/proc/sys/user/max_user_namespaces")
                .flatMap { Int($0.filter { !$0.isWhitespace }) },
            unprivilegedUserNamespaceClone: flag("/proc/sys/kernel/unprivileged_userns_clone"),
            appArmorRestrictsUserNamespaces:
                flag("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
            namespaces: namespaces,
            cgroups: layout,
            cgroupControllers: controllers,
            cgroupFreeze: v2File("cgroup.freeze"),
            cgroupKill: v2File("cgroup.kill"),
            pidfd: probes.pidfdOpen >= 0)
    }

    /// One missing or limited feature, with what would provide it.
    public struct Problem: Codable, Sendable, Equatable, CustomStringConvertible {
        public enum Severity: String, Codable, Sendable {
            /// The sandbox cannot be built as designed.
            case missing
            /// It works, with less protection or a fallback.
            case limited
        }

        public var feature: String
        public var severity: Severity
        public var message: String

        public var description: String { "\(feature): \(message)" }
    }
}

/// Names in a directory, without `.` and `..`.
func directoryEntries(_ path: String) throws -> [String] {
    guard let dir = opendir(path) else { throw CgroupFS.Failure(errno) }
    defer { closedir(dir) }
    var names: [String] = []
    while let entry = readdir(dir) {
        let name = directoryEntryString(entry)
        if name != "." && name != ".." && entry.pointee.d_type == DT_DIR { names.append(name) }
    }
    return names
}

/// `6.18.0-1-amd64` >= (5, 14)?
public func kernelAtLeast(_ release: String, _ version: (Int, Int)) -> Bool {
    let numbers = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
    guard numbers.count == 2 else { return false }
    return (numbers[0], numbers[1]) >= version
}
