import LauncherProtocol

/// Everything the sandbox of one app is, as a value: which namespaces it gets, what it sees,
/// who it runs as, what Landlock and seccomp let it do, its limits and its environment.
///
/// `SandboxPolicy` compiles it from an installed app's entitlements and the admin's settings;
/// `appd profile` prints it; `encoded()` turns it into the text `appd-exec` reads
/// (docs/launcher-protocol.md) and `SeccompCompiler` turns its seccomp part into BPF. The
/// launcher has no policy logic of its own, so what this value says is exactly what the app
/// gets.
public struct SandboxProfile: Sendable, Equatable, Codable {
    public var app: AppIdentity
    public var namespaces: [Namespace]
    /// The uts namespace's hostname: the app's name, reduced to what a hostname may hold.
    public var hostname: String
    /// Bring `lo` up in the private network namespace (Foundation's run loop needs it).
    public var loopback: Bool
    /// Applied in order on an empty tmpfs root.
    public var mounts: [Mount]
    /// A terminal is attached to 0-2: mount a devpts instance and keep the tty.
    public var console: Bool
    public var uid: UInt32
    public var gid: UInt32
    public var groups: [UInt32]
    public var rlimits: [ResourceLimit]
    /// The instance cgroup's limits (memory.max, pids.max).
    public var cgroupLimits: CgroupLimits
    public var landlock: LandlockRules
    public var seccomp: SeccompRules
    /// `cgroup.procs` files the launcher joins before anything else; filled in per instance.
    public var cgroupProcs: [String]
    /// `cgroup.procs` files the launcher moves its output relay into, right after forking it
    /// (the instance's `relay` leaf: never frozen with the app); filled in per instance.
    public var relayCgroupProcs: [String] = []
    public var workingDirectory: String
    /// The app's whole environment, in order. Nothing is inherited from the caller.
    public var environment: [EnvironmentVariable]
    public var executable: String
    /// argv, argv[0] first.
    public var arguments: [String]
    /// bind(2) to an explicit TCP or UDP port is refused (EPERM) by a cgroup program attached
    /// to the instance's cgroup (network.client: Landlock has no UDP rules, and no TCP rules
    /// before ABI 4); port 0 stays allowed. The daemon attaches it, not the launcher.
    public var denyPortBinds: Bool
    /// The loopback guard (apps on the host's network; nil for an app in its own network
    /// namespace, whose lo is its own): connect(2) and UDP sends to 127.0.0.0/8, ::1 and their
    /// kin are refused (EPERM) by cgroup programs on the instance's cgroup, but for these ports
    /// (`[Sandbox]`/`[App ID]` `LoopbackPorts=`) and the instance's own sockets. The daemon
    /// attaches it, not the launcher.
    public var loopbackPorts: [UInt16]? = nil
    /// Every entitlement the app requested and what became of it.
    public var entitlements: [EntitlementDecision]
    /// Layers this profile runs without because the admin allowed a weaker mode, with why.
    public var weakenedLayers: [String]
    /// Kernel features this profile runs without because another layer closes the same gap
    /// (docs/sandbox-layers.md), each with what stands in for it. Empty on a kernel with
    /// everything.
    public var reducedLayers: [String]
    /// The data container's disk limit (`[Sandbox] DataQuota=`), filled in by the state root
    /// (AppStore); not part of what appd-exec reads.
    public var dataQuota: DataQuotaStatus?
    /// What the admin's `[App ID]` section changed for this app (limits, revoked
    /// entitlements), as `appd profile` shows it; nil without one. Not read by appd-exec.
    public var adminOverride: String? = nil
    /// Asks the kernel to audit what Landlock and seccomp refuse the app (the `log-denials`
    /// record): set by the daemon, whose denial log reads the records (docs/denials.md); off
    /// for `appd run` and when audit's failure mode would panic the host.
    public var logDenials = false
    /// No mapping of the app's gains PROT_EXEC it did not have (`mdwe`: PR_SET_MDWE with
    /// PR_MDWE_REFUSE_EXEC_GAIN before the exec, Linux 6.3): an app without `cs.allow-jit` or
    /// `cs.allow-unsigned-executable-memory` runs only the code it was mapped with. Where the
    /// kernel lacks it, seccomp refuses mprotect(PROT_EXEC) instead (docs/sandbox-layers.md).
    public var refuseExecGain = false
    /// vm.memfd_noexec=2 in the instance's pid namespace (`memfd-noexec`, Linux 6.3): no memfd
    /// of the instance can be exec'd, whatever its entitlements.
    public var memfdNoexec = false
    /// A plain OCI container's own user namespace (docs/oci-runtime.md, "Plain containers"):
    /// `uid`, `gid` and `groups` are ids inside it. Nil for every app.
    public var userNamespace: UserNamespace? = nil
    /// A plain container's exact capability sets, held in its user namespace only. Nil (none
    /// at all) for every app.
    public var capabilities: CapabilitySets? = nil
    /// A plain container whose config says noNewPrivileges: false. Nil (no_new_privs set) for
    /// every app.
    public var newPrivileges: Bool? = nil
    /// A plain container's namespaced sysctls, written inside its namespaces. Nil for apps.
    public var sysctls: [Sysctl]? = nil
    /// A plain container whose root is its image's rootfs, idmapped onto `userNamespace`
    /// (`root image`); nil for an empty tmpfs root (every app).
    public var imageRoot: ImageRoot? = nil
    /// The host programs the app may execute besides its bundle's (`AppdHostExecutables`), each
    /// with whether it runs code it is given (an interpreter); nil or empty: none. The Landlock
    /// rules say the same (`rx` on each file); this is what `appd profile` shows.
    public var hostExecutables: [HostExecutable]? = nil

    public struct HostExecutable: Sendable, Equatable, Codable {
        public var path: String
        public var interpreter: Bool
        /// Not granted on this host: not a regular file here (the launch allows nothing there).
        public var missing: Bool?

        public init(path: String, interpreter: Bool, missing: Bool? = nil) {
            self.path = path
            self.interpreter = interpreter
            self.missing = missing
        }
    }

    /// The rootfs at `source` as the root; read-only once mounted on when `readOnly`.
    /// Idmapped onto the container's ids unless `owned` (appd-oci's overlay over idmapped
    /// layers, whose files are the container's ids already: no kernel idmaps an overlay).
    public struct ImageRoot: Sendable, Equatable, Codable {
        public var source: String
        public var readOnly: Bool
        /// nil in records written before it existed: idmapped.
        public var owned: Bool?

        public init(source: String, readOnly: Bool, owned: Bool = false) {
            self.source = source
            self.readOnly = readOnly
            self.owned = owned ? true : nil
        }
    }

    /// Ids 0..<count inside are the host's hostUID.. and hostGID.. .
    public struct UserNamespace: Sendable, Equatable, Codable {
        public var hostUID: UInt32
        public var hostGID: UInt32
        public var count: UInt32

        public init(hostUID: UInt32, hostGID: UInt32, count: UInt32) {
            self.hostUID = hostUID
            self.hostGID = hostGID
            self.count = count
        }
    }

    /// Capability names (`CAP_CHOWN`...) per set.
    public struct CapabilitySets: Sendable, Equatable, Codable {
        public var bounding: [String] = []
        public var effective: [String] = []
        public var permitted: [String] = []
        public var inheritable: [String] = []
        public var ambient: [String] = []

        public init() {}
    }

    /// A sysctl: a name and a value, as an environment variable is.
    public typealias Sysctl = EnvironmentVariable

    public struct AppIdentity: Sendable, Equatable, Codable {
        public var bundleID: String
        public var bundlePath: String
        public var dataContainer: String
    }

    /// The names are the launcher protocol's (LauncherProtocol).
    public typealias Namespace = ProfileNamespace

    public struct Mount: Sendable, Equatable, Codable {
        public typealias Kind = ProfileMountKind
        public var kind: Kind
        /// Host path for binds, link target for symlinks, nil otherwise.
        public var source: String?
        /// Path inside the sandbox.
        public var destination: String
        /// For tmpfs, dir and file.
        public var mode: UInt32?
        /// For file.
        public var content: String?
        /// For fs: the filesystem type and the config's options (comma-separated).
        public var fsType: String? = nil
        public var options: String? = nil

        public static func roBind(_ path: String, optional: Bool = false) -> Mount {
            Mount(kind: optional ? .roBindTry : .roBind, source: path, destination: path)
        }
        public static func rwBind(_ path: String) -> Mount {
            Mount(kind: .rwBind, source: path, destination: path)
        }
        /// A plain container's writable volume: executable, as under runc.
        public static func rwBindExec(_ path: String) -> Mount {
            Mount(kind: .rwBindExec, source: path, destination: path)
        }
        public static func devBind(_ path: String) -> Mount {
            Mount(kind: .devBind, source: path, destination: path)
        }
        /// A device node of the host bound at another path (a plain container's terminal at
        /// /dev/console).
        public static func devBind(_ source: String, at destination: String) -> Mount {
            Mount(kind: .devBind, source: source, destination: destination)
        }
        public static func symlink(_ target: String, at path: String) -> Mount {
            Mount(kind: .symlink, source: target, destination: path)
        }
        public static func tmpfs(_ path: String, mode: UInt32) -> Mount {
            Mount(kind: .tmpfs, destination: path, mode: mode)
        }
        public static func file(_ path: String, mode: UInt32, content: String) -> Mount {
            Mount(kind: .file, destination: path, mode: mode, content: content)
        }
        public static func dir(_ path: String, mode: UInt32) -> Mount {
            Mount(kind: .dir, destination: path, mode: mode)
        }
        /// A record with only a destination (proc, dev, mask, ro-path).
        public static func at(_ path: String, _ kind: Kind) -> Mount {
            Mount(kind: kind, destination: path)
        }
        /// A device node or fifo made in place (`type` c, b or p), owned by the host ids
        /// `uid`:`gid`, on a nodev mount: `mount node`.
        public static func node(
            _ path: String, type: Character, major: UInt32, minor: UInt32, mode: UInt32,
            uid: UInt32, gid: UInt32
        ) -> Mount {
            Mount(
                kind: .node, destination: path, mode: mode,
                options: "\(type):\(major):\(minor):\(uid):\(gid)")
        }
        public static func fs(_ type: String, source: String, at path: String, options: String)
            -> Mount
        {
            Mount(
                kind: .fs, source: source, destination: path, fsType: type, options: options)
        }
    }

    public struct ResourceLimit: Sendable, Equatable, Codable {
        /// As `prlimit` names them: nofile, nproc, core, as, fsize, memlock, stack.
        public var name: String
        /// nil = unlimited.
        public var soft: UInt64?
        public var hard: UInt64?

        public init(name: String, soft: UInt64?, hard: UInt64?) {
            self.name = name
            self.soft = soft
            self.hard = hard
        }
    }

    public struct EnvironmentVariable: Sendable, Equatable, Codable {
        public var name: String
        public var value: String

        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    public func environmentValue(_ name: String) -> String? {
        environment.last { $0.name == name }?.value
    }
}

/// Landlock: what the app may reach in the filesystem and over TCP, and the scopes it is
/// confined to. Anything not listed is denied.
public struct LandlockRules: Sendable, Equatable, Codable {
    /// ro, rx, rw, rwx (LauncherProtocol).
    public typealias Access = LandlockAccess
    public struct PathRule: Sendable, Equatable, Codable {
        public var access: Access
        public var path: String

        public init(access: Access, path: String) {
            self.access = access
            self.path = path
        }
    }
    public typealias PortAction = LandlockPortAction
    public struct PortRule: Sendable, Equatable, Codable {
        public var action: PortAction
        public var port: UInt16
    }
    public typealias Scope = LandlockScopeName

    public var paths: [PathRule] = []
    /// TCP actions denied except for the ports in `ports`.
    public var restrictedTCP: [PortAction] = []
    public var ports: [PortRule] = []
    public var scopes: [Scope] = []
    /// The launcher refuses to run on a kernel below this ABI; 0 means Landlock is off (only
    /// with an explicit weaker mode).
    public var minimumABI: Int = 1

    public init() {}
}

/// The seccomp part: a default-allow filter with a deny list, refusing foreign syscall ABIs.
/// Kept as data (not BPF) so `appd profile` can show it and tests can reason about it;
/// `SeccompCompiler` exports the BPF.
public struct SeccompRules: Sendable, Hashable, Codable {
    public var rules: [SeccompRule] = []
    /// Refuse to launch without a filter. False only with an explicit weaker mode.
    public var required = true

    public init() {}
}

public struct SeccompRule: Sendable, Hashable, Codable {
    public enum Action: Sendable, Hashable, Codable {
        /// Fail the call with this errno.
        case errno(Int32)
        /// Allow it but log it (used to let one exact value through a rule that refuses the
        /// rest, since the filter's default action is already "allow").
        case log
    }
    /// Compared against syscall argument `index`. `maskedEqual` compares `(arg & mask) == value`.
    public struct Condition: Sendable, Hashable, Codable {
        public enum Operator: String, Sendable, Hashable, Codable {
            case equal, notEqual, greater, greaterOrEqual, less, maskedEqual
        }
        public var index: Int
        public var op: Operator
        public var value: UInt64
        public var mask: UInt64?

        public static func arg(_ index: Int, _ op: Operator, _ value: UInt64) -> Condition {
            Condition(index: index, op: op, value: value, mask: nil)
        }
        /// `(arg & bits) == bits`: any of a set of flag bits, one rule per bit.
        public static func arg(_ index: Int, hasBits bits: UInt64) -> Condition {
            Condition(index: index, op: .maskedEqual, value: bits, mask: bits)
        }
        /// The low 32 bits equal `value`, whatever the high bits: ioctl request numbers are
        /// ints, so the kernel ignores the high half and so must the filter.
        public static func arg(_ index: Int, low32 value: UInt32) -> Condition {
            Condition(index: index, op: .maskedEqual, value: UInt64(value), mask: 0xFFFF_FFFF)
        }
    }

    public var syscall: String
    public var action: Action
    public var conditions: [Condition]
    /// Why the rule exists, for `appd profile`.
    public var reason: String
}

/// What became of one requested entitlement.
public struct EntitlementDecision: Sendable, Equatable, Codable {
    public enum Outcome: String, Sendable, Codable {
        /// It changes the sandbox; `effect` says how.
        case granted
        /// Requested as false (or empty): nothing changes.
        case notRequested = "not-requested"
        /// It has no Linux effect (iCloud, push ...); recorded and shown, nothing else.
        case noLinuxEffect = "no-linux-effect"
        /// Admin policy does not allow it; `effect` says which part.
        case refused
        /// appd does not know the key.
        case unknown
    }
    public var key: String
    public var outcome: Outcome
    public var effect: String
}

/// The data container's disk limit as the state root's filesystem enforces it.
public struct DataQuotaStatus: Sendable, Equatable, Codable {
    /// `[Sandbox] DataQuota=` in bytes.
    public var limitBytes: Int64
    /// The kernel enforces it (a project quota on the state root's filesystem).
    public var enforced: Bool
    /// The project the data container is charged to (the app's uid).
    public var projectID: UInt32
    /// Bytes charged to that project, where the filesystem accounts them.
    public var usedBytes: Int64?
    /// Why it is not enforced.
    public var reason: String?

    public init(
        limitBytes: Int64, enforced: Bool, projectID: UInt32, usedBytes: Int64? = nil,
        reason: String? = nil
    ) {
        self.limitBytes = limitBytes
        self.enforced = enforced
        self.projectID = projectID
        self.usedBytes = usedBytes
        self.reason = reason
    }
}
