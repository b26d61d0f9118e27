import CLinux
import Glibc
import LauncherProtocol

/// The sandbox as `docs/launcher-protocol.md` spells it: a value parsed from the profile fd.
/// The launcher has no policy of its own; every field comes from one kind of record.
///
/// Collections are arrays, not sets: instantiating a `Set`'s generic metadata makes the runtime
/// scan every protocol conformance of the statically linked stdlib, a measurable part of the
/// launch time.
struct Profile {
    var cgroups: [String] = []
    /// Where the output relay goes once forked (`relay-cgroup` records).
    var relayCgroups: [String] = []
    var namespaces: [Namespace] = []
    var hostname: String?
    var loopback = false
    /// `root`: the launcher builds a new root, an empty tmpfs or `imageRoot`.
    var buildsRoot = false
    /// `root image SOURCE ro|rw`: a plain container's root is its image's rootfs, idmapped
    /// onto its user namespace's ids.
    var imageRoot: ImageRoot?
    var mounts: [MountRecord] = []
    var console = false
    var uid: uid_t?
    var gid: gid_t?
    var groups: [gid_t]?
    var rlimits: [ResourceLimit] = []
    var landlockPaths: [(access: FilesystemAccess, path: String)] = []
    var landlockPorts: [(right: NetworkRight, port: UInt64)] = []
    var landlockNetRestrict: [NetworkRight] = []
    var landlockScopes: [LandlockScope] = []
    var landlockMinABI: Int?
    var seccompRequired = true
    /// `log-denials`: ask the kernel to audit what Landlock and seccomp refuse the app.
    var logDenials = false
    /// `mdwe`: the app process sets PR_SET_MDWE (no mapping gains PROT_EXEC) before its exec.
    var refuseExecGain = false
    /// `memfd-noexec`: PID 1 sets vm.memfd_noexec to 2 in the instance's pid namespace (no
    /// memfd can be exec'd).
    var memfdNoexec = false
    /// `userns`: a plain container's user namespace (uid, gid and groups are ids inside it).
    var userNamespace: UserNamespaceMap?
    /// `capabilities`: a plain container's exact sets, in its user namespace.
    var capabilities: CapabilityMasks?
    /// `new-privileges`: no_new_privs stays unset.
    var newPrivileges = false
    /// `sysctl`: written by PID 1 under /proc/sys once the root is built.
    var sysctls: [(name: String, value: String)] = []
    var directory: String?
    var environment: [String] = []
    var executable: String?
    var arguments: [String] = []
}

/// The names of `unshare`, `landlock-fs`, `landlock-net*` and `landlock-scope` are the
/// protocol's (LauncherProtocol); what they mean to the kernel is the launcher's.
typealias Namespace = ProfileNamespace
typealias FilesystemAccess = LandlockAccess
typealias NetworkRight = LandlockPortAction
typealias LandlockScope = LandlockScopeName

extension Namespace {
    var cloneFlag: Int32 {
        switch self {
        case .user: APPD_CLONE_NEWUSER
        case .mount: APPD_CLONE_NEWNS
        case .pid: APPD_CLONE_NEWPID
        case .net: APPD_CLONE_NEWNET
        case .ipc: APPD_CLONE_NEWIPC
        case .uts: APPD_CLONE_NEWUTS
        case .cgroup: APPD_CLONE_NEWCGROUP
        }
    }
}

/// The bind kinds of `mount`.
enum BindKind {
    case readOnly, readOnlyTry, readWrite, readWriteExec, device

    /// The kind as the profile names it, for messages.
    var rawValue: String {
        switch self {
        case .readOnly: ProfileMountKind.roBind.rawValue
        case .readOnlyTry: ProfileMountKind.roBindTry.rawValue
        case .readWrite: ProfileMountKind.rwBind.rawValue
        case .readWriteExec: ProfileMountKind.rwBindExec.rawValue
        case .device: ProfileMountKind.devBind.rawValue
        }
    }
}

/// One `mount` record. Destinations are paths inside the new root.
enum MountRecord {
    case bind(BindKind, source: String, destination: String)
    case tmpfs(destination: String, mode: mode_t)
    case proc(destination: String)
    case dev(destination: String)
    case symlink(target: String, destination: String)
    case directory(destination: String, mode: mode_t)
    case file(destination: String, mode: mode_t, content: [UInt8])
    /// A kernel filesystem with the config's options (plain containers).
    case filesystem(type: String, source: String, destination: String, options: String)
    case mask(destination: String)
    case readOnlyPath(destination: String)
    /// A device node or fifo (`kind` S_IFCHR, S_IFBLK or S_IFIFO), made on a nodev mount only.
    case node(
        destination: String, kind: mode_t, mode: mode_t, device: dev_t, uid: UInt32, gid: UInt32)
}

/// A plain container's root: the rootfs at `source`, read-only once the mounts are made when
/// `readOnly` (the config's root.readonly).
struct ImageRoot {
    var source: String
    var readOnly: Bool
    /// Its files are the container's ids already (appd-oci's overlay): not idmapped.
    var owned = false
}

/// Ids 0..<count inside the user namespace are the host's uid.. and gid.. .
struct UserNamespaceMap {
    var uid: UInt32
    var gid: UInt32
    var count: UInt32
}

/// One bit per capability number, for each set of `capabilities`.
struct CapabilityMasks {
    var bounding: UInt64 = 0
    var effective: UInt64 = 0
    var permitted: UInt64 = 0
    var inheritable: UInt64 = 0
    var ambient: UInt64 = 0
    /// The sets given so far (each once, all five required).
    var given: [ProfileCapabilitySet] = []
}

struct ResourceLimit {
    var name: String
    var resource: Int32
    var soft: UInt64
    var hard: UInt64
}

extension Profile {
    /// Checks the records against each other, before anything is done: a profile that would
    /// mount in the caller's namespace, or run the app as root by omission, is refused here.
    func validate() throws {
        func refuse(_ message: String) -> LaunchFailure { LaunchFailure("profile", message) }
        if namespaces.contains(.user) {
            // A plain container's user namespace is `userns`, entered by the app process.
            throw LaunchFailure(
                "unshare",
                "user namespaces are not supported (appd-exec runs as root and switches to the"
                    + " app's uid)")
        }
        if (buildsRoot || !mounts.isEmpty || console) && !namespaces.contains(.mount) {
            throw refuse("root, mount and console records need 'unshare mount'")
        }
        if !mounts.isEmpty && !buildsRoot {
            throw refuse("mount records need a 'root'")
        }
        // The image root is idmapped onto the container's ids: without them the container's
        // root would write it as the host's.
        if imageRoot != nil && userNamespace == nil {
            throw refuse("'root image' needs 'userns'")
        }
        if loopback && !namespaces.contains(.net) { throw refuse("loopback needs 'unshare net'") }
        // Capabilities and privileges are only ever held in a user namespace of the app's own:
        // never as the host's root.
        if userNamespace == nil && (capabilities != nil || newPrivileges) {
            throw refuse("capabilities and new-privileges need 'userns'")
        }
        if let capabilities, capabilities.given.count != ProfileCapabilitySet.allCases.count {
            throw refuse("capabilities must give all five sets")
        }
        if let map = userNamespace {
            guard !namespaces.contains(.user), namespaces.contains(.mount),
                namespaces.contains(.pid)
            else { throw refuse("userns needs 'unshare mount pid' and no 'unshare user'") }
            for id in [uid ?? 0, gid ?? 0] + (groups ?? []) where id >= map.count {
                throw refuse("id \(id) is outside the user namespace's \(map.count) ids")
            }
        }
        if hostname != nil && !namespaces.contains(.uts) {
            throw refuse("hostname needs 'unshare uts'")
        }
        for record in mounts {
            // Mounts go inside the new root, which is made `/` before the records are applied
            // (Mounts): something mounted on `/` would sit above the root, unseen.
            switch record {
            case .bind(_, _, let destination), .tmpfs(let destination, _), .proc(let destination),
                .dev(let destination), .symlink(_, let destination), .file(let destination, _, _),
                .filesystem(_, _, let destination, _), .mask(let destination),
                .readOnlyPath(let destination), .node(let destination, _, _, _, _, _):
                if Self.isRoot(destination) {
                    throw refuse(
                        "a mount record cannot have / as its destination (the root is the 'root' record's)"
                    )
                }
            case .directory: break
            }
        }
        guard uid != nil, gid != nil else { throw refuse("uid and gid records are required") }
        guard let executable else { throw refuse("no exec record") }
        guard executable.hasPrefix("/") else { throw refuse("exec path must be absolute") }
        guard !arguments.isEmpty else { throw refuse("no arg record (argv[0])") }
    }

    var unshareFlags: Int32 { namespaces.reduce(0) { $0 | $1.cloneFlag } }

    /// Whether an absolute path names `/` itself: every component empty or `.`.
    static func isRoot(_ path: String) -> Bool {
        var component = 0
        var dotOnly = true
        for byte in path.utf8 {
            if byte == UInt8(ascii: "/") {
                if component > 0 && !(component == 1 && dotOnly) { return false }
                component = 0
                dotOnly = true
            } else {
                component += 1
                if byte != UInt8(ascii: ".") { dotOnly = false }
            }
        }
        return component == 0 || (component == 1 && dotOnly)
    }
}

extension Array where Element: Equatable {
    /// Set-like insertion for the profile's small lists.
    mutating func appendUnique(_ element: Element) {
        if !contains(element) { append(element) }
    }
}
