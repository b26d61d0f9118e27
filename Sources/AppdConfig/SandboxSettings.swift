/// The `[Sandbox]` section of appd.conf: what the admin decides about every app's sandbox.
/// config/appd.conf documents each key with its default.
public struct SandboxSettings: Sendable, Equatable {
    /// Host directories every app sees read-only (and may execute from), at the same path.
    /// `/bin`, `/sbin`, `/lib*` are added as the host has them (symlinks into /usr here). A
    /// Swift app carries its runtime in Frameworks/ (docs/info-plist.md): nothing of a
    /// toolchain is shown.
    public var systemPaths = ["/usr"]
    /// The parts of the host's /etc an app sees; everything else (shadow, ssh keys, sudoers,
    /// machine-id ...) is absent. passwd, group, hostname and hosts are generated per app.
    public var etcFiles = [
        "alternatives", "ca-certificates", "ca-certificates.conf", "debian_version", "fonts",
        "gai.conf", "host.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "locale.alias",
        "locale.conf", "localtime", "mime.types", "nsswitch.conf", "os-release", "protocols",
        "resolv.conf", "services", "ssl/certs", "timezone",
    ]
    /// Where the temporary-exception entitlements may reach: a requested path is granted only
    /// when it lies beneath one of these.
    public var allowedReadOnlyPaths: [String] = []
    public var allowedReadWritePaths: [String] = []
    /// `com.apple.security.app-sandbox` must be true. When false, apps without it are still
    /// sandboxed exactly the same way: appd never runs an app unconfined.
    public var requireAppSandboxEntitlement = true
    /// Per-instance cgroup limits.
    public var memoryMax: Int64 = 512 << 20
    public var tasksMax = 512
    public var openFilesMax: UInt64 = 4096
    /// The most each app's data container may hold, enforced by the kernel with a project
    /// quota on the state root's filesystem (ext4, xfs); nil: no limit. Where the filesystem
    /// has no project quotas it is not enforced, and `appd profile` and `appd doctor` say so.
    public var dataQuota: Int64?
    /// Ports on the host's loopback (127.0.0.0/8, ::1) that apps on the host's network (the
    /// network entitlements) may connect to; every other loopback port is refused them, but
    /// their own sockets'. 53 by default: the host's DNS stub (systemd-resolved's 127.0.0.53).
    public var loopbackPorts: [UInt16] = [53]
    /// `PATH` inside the sandbox.
    public var path = "/usr/local/bin:/usr/bin:/bin"
    /// Layers the admin lets appd launch without when the kernel lacks them. Empty: a missing
    /// layer refuses the launch.
    public var weakerModes: Set<WeakerMode> = []
    /// `appd-exec`; nil = next to the running appd, then /usr/libexec/appd/appd-exec.
    public var launcher: String?

    public enum WeakerMode: String, Sendable, CaseIterable, Comparable {
        /// No Landlock at all (kernels before 5.13 or booted without it in `lsm=`).
        case noLandlock = "no-landlock"
        /// Landlock without TCP rules (kernels before 6.7, ABI < 4) *and* no seccomp to refuse
        /// `listen()`: network-client apps may then listen on TCP ports. With seccomp the gap
        /// is closed and network-client apps launch without this (docs/sandbox-layers.md).
        case noLandlockNetwork = "no-landlock-network"
        /// Landlock without abstract-unix scoping (before 6.12, ABI < 6) *and* no seccomp to
        /// refuse unix sockets: apps on the host network may then reach the host's abstract
        /// unix sockets. With seccomp they launch without this (docs/sandbox-layers.md).
        case noLandlockScopes = "no-landlock-scopes"
        /// No seccomp filter. The deny list then rests on capabilities and no_new_privs alone.
        case noSeccomp = "no-seccomp"

        public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    }

    public init() {}
}
