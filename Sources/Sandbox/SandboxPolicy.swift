import AppBundle
import AppdConfig
import Glibc

/// The installed app a profile is for: only what the policy needs, so the Sandbox module
/// stays independent of the registry.
public struct SandboxSubject: Sendable, Equatable {
    public var bundleID: String
    /// CFBundleName or the bundle's file name; becomes the hostname.
    public var name: String
    /// `Containers/Bundle/<UUID>`, holding `Name.app`.
    public var bundleContainer: String
    /// `Containers/Bundle/<UUID>/Name.app`.
    public var bundlePath: String
    /// Absolute path of the executable inside the bundle.
    public var executable: String
    /// `Containers/Data/<UUID>`.
    public var dataContainer: String
    public var uid: UInt32
    public var gid: UInt32
    /// The app's entitlements as recorded at install.
    public var entitlements: Entitlements
    /// Application-group containers, by group id, for the groups the app is entitled to.
    public var groupContainers: [GroupContainer]
    /// The host programs the app may execute (`AppdHostExecutables` of its signed Info.plist,
    /// granted by its signer at install); nothing else of the host is executable to it.
    public var hostExecutables: [String] = []
    /// Where the bundle container and the data container are on the host when the sandbox
    /// shows them elsewhere (appd-oci shows the image's `/Name.app` and `/appd/data`); nil:
    /// at their own paths, as the daemon shows them (the iOS model: real, unguessable paths).
    /// Every other use of the two paths (the environment, passwd, Landlock, the working
    /// folder) is the sandbox's.
    public var bundleSource: String? = nil
    public var dataSource: String? = nil

    public struct GroupContainer: Sendable, Equatable {
        public var groupID: String
        public var path: String
        public var gid: UInt32
        public init(groupID: String, path: String, gid: UInt32) {
            self.groupID = groupID
            self.path = path
            self.gid = gid
        }
    }

    public init(
        bundleID: String, name: String, bundleContainer: String, bundlePath: String,
        executable: String, dataContainer: String, uid: UInt32, gid: UInt32,
        entitlements: Entitlements, groupContainers: [GroupContainer] = [],
        hostExecutables: [String] = []
    ) {
        self.hostExecutables = hostExecutables
        self.bundleID = bundleID
        self.name = name
        self.bundleContainer = bundleContainer
        self.bundlePath = bundlePath
        self.executable = executable
        self.dataContainer = dataContainer
        self.uid = uid
        self.gid = gid
        self.entitlements = entitlements
        self.groupContainers = groupContainers
    }
}

/// What the kernel offers, as far as the policy cares.
public struct KernelLayers: Sendable, Equatable {
    /// 0 = no Landlock.
    public var landlockABI: Int
    public var seccomp: Bool
    /// prctl(PR_SET_MDWE) (Linux 6.3): memory that was not executable never becomes so.
    public var mdwe: Bool
    /// vm.memfd_noexec, per pid namespace (Linux 6.3).
    public var memfdNoexec: Bool

    public init(landlockABI: Int, seccomp: Bool, mdwe: Bool = true, memfdNoexec: Bool = true) {
        self.landlockABI = landlockABI
        self.seccomp = seccomp
        self.mdwe = mdwe
        self.memfdNoexec = memfdNoexec
    }
}

/// Compiles an app's entitlements and the admin's settings into a `SandboxProfile`.
///
/// The baseline is the same for every app (docs/sandbox.md, "The sandbox"): every
/// namespace but user, a tmpfs root with the system directories read-only, the app's bundle
/// read-only and its data container read-write at their real paths, its own uid with no
/// capabilities, Landlock allowing only those paths, and a seccomp deny list. Entitlements
/// only ever add to it.
public struct SandboxPolicy: Sendable {
    public var settings: SandboxSettings
    public var kernel: KernelLayers
    /// Prefix for host lookups (`/bin` a symlink? which `/dev/video*` exist?); tests point it at
    /// a fake tree.
    public var hostRoot: String

    /// The Landlock ABI that brings TCP rules (6.7) and scoping (6.12).
    static let landlockNetworkABI = 4
    static let landlockScopeABI = 6

    public init(settings: SandboxSettings, kernel: KernelLayers, hostRoot: String = "") {
        self.settings = settings
        self.kernel = kernel
        self.hostRoot = hostRoot
    }

    public func profile(
        for app: SandboxSubject, arguments: [String] = [], console: Bool = false
    ) throws -> SandboxProfile {
        var grants = Grants(app: app, settings: settings, hostRoot: hostRoot)
        try grants.decide()

        var profile = SandboxProfile(
            app: .init(
                bundleID: app.bundleID, bundlePath: app.bundlePath,
                dataContainer: app.dataContainer),
            namespaces: grants.network == .none
                ? [.mount, .pid, .net, .ipc, .uts, .cgroup] : [.mount, .pid, .ipc, .uts, .cgroup],
            hostname: Self.hostname(for: app),
            loopback: grants.network == .none,
            mounts: [],
            console: console,
            uid: app.uid,
            gid: app.gid,
            groups: (grants.groupContainers.map(\.gid) + grants.deviceGroups).uniqued(),
            rlimits: [
                .init(name: "core", soft: 0, hard: 0),
                .init(name: "nofile", soft: settings.openFilesMax, hard: settings.openFilesMax),
            ],
            cgroupLimits: CgroupLimits(memoryMax: settings.memoryMax, pidsMax: settings.tasksMax),
            landlock: LandlockRules(),
            seccomp: SeccompRules(),
            cgroupProcs: [],
            workingDirectory: app.dataContainer,
            environment: environment(for: app, console: console),
            executable: app.executable,
            arguments: [app.executable] + arguments,
            denyPortBinds: grants.network == .client,
            entitlements: grants.decisions,
            weakenedLayers: [],
            reducedLayers: []
        )
        profile.mounts = mounts(for: app, grants: grants, console: console)
        profile.landlock = try landlock(
            for: app, grants: grants, console: console,
            weakened: &profile.weakenedLayers, reduced: &profile.reducedLayers)
        profile.seccomp = try seccomp(
            grants: grants, weakened: &profile.weakenedLayers, reduced: &profile.reducedLayers)
        if grants.network != .none { profile.loopbackPorts = settings.loopbackPorts }
        if !app.hostExecutables.isEmpty {
            profile.hostExecutables = app.hostExecutables.map {
                .init(
                    path: $0, interpreter: HostExecutables.isInterpreter(resolved($0)),
                    missing: isRegularFile($0) ? nil : true)
            }
        }
        profile.refuseExecGain = !grants.writableExecutableMemory && kernel.mdwe
        profile.memfdNoexec = kernel.memfdNoexec
        return profile
    }

    // MARK: - What the app sees

    func mounts(for app: SandboxSubject, grants: Grants, console: Bool) -> [SandboxProfile.Mount] {
        var mounts: [SandboxProfile.Mount] = []
        for path in settings.systemPaths { mounts.append(.roBind(path, optional: true)) }
        // Debian merged /usr: /bin, /lib ... are symlinks there, and must be here too.
        for name in ["bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
            let host = "/\(name)"
            if let target = readLink(hostRoot + host) {
                mounts.append(.symlink(target, at: host))
            } else if isDirectory(hostRoot + host) {
                mounts.append(.roBind(host))
            }
        }
        mounts.append(.tmpfs("/etc", mode: 0o755))
        for name in settings.etcFiles { mounts.append(.roBind("/etc/\(name)", optional: true)) }
        mounts += etcIdentity(for: app)
        mounts.append(SandboxProfile.Mount(kind: .proc, destination: "/proc"))
        mounts.append(SandboxProfile.Mount(kind: .dev, destination: "/dev"))
        for device in grants.devices { mounts.append(.devBind(device)) }
        // The containers sit at their real, unguessable paths; nothing else of the state root.
        mounts.append(
            .init(
                kind: .roBind, source: app.bundleSource ?? app.bundleContainer,
                destination: app.bundleContainer))
        mounts.append(
            .init(
                kind: .rwBind, source: app.dataSource ?? app.dataContainer,
                destination: app.dataContainer))
        for group in grants.groupContainers { mounts.append(.rwBind(group.path)) }
        for path in grants.readOnlyPaths { mounts.append(.roBind(path)) }
        for path in grants.readWritePaths { mounts.append(.rwBind(path)) }
        return mounts
    }

    /// passwd, group, hostname and hosts written for the app: it learns its own name and
    /// nothing about the host's accounts.
    func etcIdentity(for app: SandboxSubject) -> [SandboxProfile.Mount] {
        let user = Self.userName(for: app)
        let host = Self.hostname(for: app)
        return [
            .file(
                "/etc/passwd", mode: 0o644,
                content: """
                    root:x:0:0:root:/:/usr/sbin/nologin
                    \(user):x:\(app.uid):\(app.gid):\(app.bundleID):\(app.dataContainer):/bin/sh
                    nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin

                    """),
            .file(
                "/etc/group", mode: 0o644,
                content: """
                    root:x:0:
                    \(user):x:\(app.gid):
                    nogroup:x:65534:

                    """),
            .file("/etc/hostname", mode: 0o644, content: host + "\n"),
            .file(
                "/etc/hosts", mode: 0o644,
                content: """
                    127.0.0.1 localhost \(host)
                    ::1 localhost ip6-localhost ip6-loopback

                    """),
        ]
    }

    func environment(for app: SandboxSubject, console: Bool) -> [SandboxProfile.EnvironmentVariable]
    {
        let home = app.dataContainer
        var variables: [(String, String)] = [
            ("HOME", home),
            ("CFFIXED_USER_HOME", home),
            ("TMPDIR", "\(home)/tmp/"),
            ("XDG_CONFIG_HOME", "\(home)/Library/Preferences"),
            ("XDG_CACHE_HOME", "\(home)/Library/Caches"),
            ("XDG_DATA_HOME", "\(home)/Library/Application Support"),
            ("APPD_BUNDLE_ID", app.bundleID),
            ("APPD_BUNDLE_PATH", app.bundlePath),
            ("PATH", settings.path),
            ("USER", Self.userName(for: app)),
            ("LOGNAME", Self.userName(for: app)),
            ("LANG", HostLocale.current),
        ]
        if console { variables.append(("TERM", "xterm-256color")) }
        return variables.map { .init(name: $0.0, value: $0.1) }
    }

    /// The app's name as a hostname label: letters, digits and '-', at most 63 bytes.
    public static func hostname(for app: SandboxSubject) -> String {
        var label = String(
            app.name.unicodeScalars.map { scalar -> Character in
                scalar.isASCII && (Character(scalar).isLetter || Character(scalar).isNumber)
                    ? Character(scalar) : "-"
            })
        while label.hasPrefix("-") { label.removeFirst() }
        while label.hasSuffix("-") { label.removeLast() }
        label = String(label.prefix(63))
        return label.isEmpty ? "app" : label
    }

    /// A user name for passwd: the bundle id's last label, or `app`.
    static func userName(for app: SandboxSubject) -> String {
        let candidate = app.bundleID.split(separator: ".").last.map(String.init) ?? "app"
        let ok = candidate.utf8.allSatisfy {
            ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D
        }
        return ok && !candidate.isEmpty ? String(candidate.prefix(32)) : "app"
    }

    // MARK: - Host lookups

    func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = Glibc.readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }
}

extension Array where Element: Hashable {
    func uniqued() -> [Element] {
        var seen = Set<Element>()
        return filter { seen.insert($0).inserted }
    }
}

extension SandboxPolicy {
    /// `path` with its links followed on the host (itself when it cannot be): `/usr/bin/python3`
    /// is `python3.11`, `/bin/sh` is `dash`, whose names say what they are.
    func resolved(_ path: String) -> String {
        guard let real = realpath(hostRoot + path, nil) else { return path }
        defer { free(real) }
        return String(cString: real)
    }

    func exists(_ path: String) -> Bool {
        var info = stat()
        return stat(hostRoot + path, &info) == 0
    }
}
