import AppdBase
import AppdConfig
import Glibc

/// Landlock and seccomp: the two layers that keep working after the app's first instruction.
extension SandboxPolicy {
    func landlock(
        for app: SandboxSubject, grants: Grants, console: Bool, weakened: inout [String],
        reduced: inout [String]
    ) throws -> LandlockRules {
        var rules = LandlockRules()
        func allow(_ access: LandlockRules.Access, _ path: String) {
            rules.paths.append(.init(access: access, path: path))
        }
        // Only signed code (docs/sandbox.md, "Host programs"): the system's folders are read,
        // never executed, and their folders of programs not even read (a rule covers all below
        // it, so /usr is given as its other folders): the dynamic loader cannot be handed a
        // host program to map either. Executable are the bundle, the loader (the kernel opens
        // it for every dynamic executable with the execute right) and the programs the signed
        // Info.plist names. Libraries are mapped executable by the loader after a plain open,
        // which Landlock's read right covers.
        for path in settings.systemPaths where exists(path) {
            for part in readOnlyParts(of: path) { allow(.ro, part) }
        }
        for loader in Self.loaders where isRegularFile(loader) { allow(.rx, loader) }
        for program in app.hostExecutables where isRegularFile(program) { allow(.rx, program) }
        allow(.ro, "/etc")
        allow(.ro, "/proc")
        for device in ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"] { allow(.rw, device) }
        for device in ["/dev/random", "/dev/urandom"] { allow(.ro, device) }
        // POSIX shared memory (shm_open, sem_open): the instance's own /dev/shm tmpfs, noexec
        // and charged to its cgroup, never the host's (appd-exec's Mounts.swift).
        allow(.rw, "/dev/shm")
        if console { allow(.rw, "/dev/pts") }
        for device in grants.devices { allow(.rw, device) }
        allow(.rx, app.bundleContainer)
        // Read-write but not executable: what the app writes, it cannot run (iOS's rule).
        allow(.rw, app.dataContainer)
        for group in grants.groupContainers { allow(.rw, group.path) }
        for path in grants.readOnlyPaths { allow(.ro, path) }
        for path in grants.readWritePaths { allow(.rw, path) }

        // What the kernel lacks, decided per layer (docs/sandbox-layers.md): a gap another
        // layer closes launches and is shown as reduced; a gap nothing closes refuses the
        // launch unless the admin named its weaker mode.
        var needed = 1
        switch grants.network {
        case .none:
            // The private network namespace is the wall; TCP rules are a second one where the
            // kernel has them.
            if kernel.landlockABI >= Self.landlockNetworkABI {
                rules.restrictedTCP = [.bind, .connect]
            }
        case .client:
            if kernel.landlockABI >= Self.landlockNetworkABI {
                rules.restrictedTCP = [.bind]
                needed = Self.landlockNetworkABI
            } else if kernel.seccomp {
                // The instance's cgroup filter (denyPortBinds) refuses binds to a port, TCP and
                // UDP alike, and seccomp refuses listen(): Landlock's TCP rule adds nothing.
                reduced.append(
                    "Landlock ABI \(kernel.landlockABI) has no TCP rules (needs 4, Linux 6.7): "
                        + "the cgroup filter refuses bind() to a port and seccomp refuses "
                        + "listen(), so the app cannot accept a connection")
            } else {
                try weaken(
                    .noLandlockNetwork, into: &weakened,
                    "Landlock ABI \(kernel.landlockABI) has no TCP rules (needs 4, Linux 6.7) and "
                        + "the kernel has no seccomp to refuse listen()",
                    effect: "network-client apps may listen on TCP ports")
            }
        case .server:
            break
        }
        if kernel.landlockABI >= Self.landlockScopeABI {
            rules.scopes = [.abstractUnix, .signal]
            // On the host network only the scope keeps the host's abstract sockets away.
            if grants.network != .none { needed = Self.landlockScopeABI }
        } else if grants.network != .none {
            if kernel.seccomp {
                // The seccomp rules of `unscopedUnixSockets` stand in for the scope; signals
                // need none: the app has its own pid namespace and uid.
                reduced.append(
                    "Landlock ABI \(kernel.landlockABI) has no scoping (needs 6, Linux 6.12): "
                        + "seccomp refuses unix sockets other than stream socketpairs, so the "
                        + "app cannot reach the host's abstract unix sockets (nor make unix "
                        + "sockets of its own); signals stay inside its pid namespace")
            } else {
                try weaken(
                    .noLandlockScopes, into: &weakened,
                    "Landlock ABI \(kernel.landlockABI) has no scoping (needs 6, Linux 6.12) and "
                        + "the kernel has no seccomp to refuse unix sockets",
                    effect: "the app can reach abstract unix sockets of the host")
            }
        }
        rules.minimumABI = needed

        if kernel.landlockABI == 0 {
            try weaken(
                .noLandlock, into: &weakened, "the kernel has no Landlock",
                effect:
                    "the filesystem is limited by mounts alone, and every host program it sees is executable to the app (AppdHostExecutables is not enforced)",
                hint: "Landlock needs CONFIG_SECURITY_LANDLOCK=y and 'landlock' in the lsm= boot "
                    + "parameter (Linux 5.13 or later)")
            rules = LandlockRules()
            rules.minimumABI = 0
        }
        return rules
    }

    /// The dynamic loaders a host may have (the ELF interpreter its programs name).
    static let loaders = [
        "/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1", "/lib/ld-linux-armhf.so.3",
        "/lib/ld-linux.so.2", "/lib/ld-musl-x86_64.so.1", "/lib/ld-musl-aarch64.so.1",
    ]
    /// Folders of programs: a system path holding one is given as its other entries.
    static let programFolders: Set<String> = ["bin", "sbin", "libexec", "games"]

    /// `path` as the folders that may be read: itself, or, when it holds a folder of programs
    /// (or `local`, which may), each of its entries but those (`local` likewise, once more).
    func readOnlyParts(of path: String, depth: Int = 0) -> [String] {
        guard depth < 2, let names = entryNames(hostRoot + path),
            names.contains(where: { Self.programFolders.contains($0) || $0 == "local" })
        else { return [path] }
        var parts: [String] = []
        for name in names.sorted() where !Self.programFolders.contains(name) {
            let child = path.hasSuffix("/") ? path + name : path + "/" + name
            parts += name == "local" ? readOnlyParts(of: child, depth: depth + 1) : [child]
        }
        return parts
    }

    /// The names in the host folder `path` (a system path: a few dozen), nil if unreadable.
    func entryNames(_ path: String) -> [String]? {
        guard let dir = opendir(path) else { return nil }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir), names.count < 4096 {
            let name = directoryEntryString(entry)
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// A regular file on the host (through links): what an execute rule may name.
    func isRegularFile(_ path: String) -> Bool {
        var info = stat()
        return stat(hostRoot + path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG
    }

    func seccomp(grants: Grants, weakened: inout [String], reduced: inout [String]) throws
        -> SeccompRules
    {
        var filter = SeccompRules()
        filter.rules = Self.baselineSeccomp
        // Only signed code runs (docs/sandbox-layers.md, "Code"): what the app can write is
        // mounted noexec, and these keep memory from becoming code.
        if !grants.writableExecutableMemory {
            filter.rules += Self.noWritableExecutableMemory
            if !kernel.mdwe && kernel.seccomp {
                filter.rules += Self.noExecGain
                reduced.append(
                    "no PR_SET_MDWE (needs Linux 6.3): seccomp refuses every mprotect() that asks "
                        + "for PROT_EXEC instead, so no mapping becomes executable after it was "
                        + "mapped (a library asking for an executable stack fails to load)")
            }
        } else if !kernel.memfdNoexec {
            reduced.append(
                "no vm.memfd_noexec (needs Linux 6.3): this app may exec a memfd it wrote; "
                    + "cs.allow-jit lets it run code it writes anyway")
        }
        if !grants.debugger { filter.rules += Self.noPtrace }
        if grants.network == .client {
            filter.rules.append(
                .init(
                    syscall: "listen", action: .errno(EPERM), conditions: [],
                    reason: "network.client without network.server: no listening sockets"))
        }
        if grants.network != .none && kernel.landlockABI < Self.landlockScopeABI {
            filter.rules += Self.unscopedUnixSockets
        }
        if !kernel.seccomp {
            try weaken(
                .noSeccomp, into: &weakened, "the kernel has no seccomp filters",
                effect: "no system call is refused by a filter",
                hint: "seccomp filters need CONFIG_SECCOMP=y and CONFIG_SECCOMP_FILTER=y")
            filter.required = false
        }
        return filter
    }

    /// A missing layer: fine only when the admin named this weaker mode, else the launch is
    /// refused with what is missing and how to get it.
    private func weaken(
        _ mode: SandboxSettings.WeakerMode, into weakened: inout [String], _ what: String,
        effect: String, hint: String? = nil
    ) throws {
        guard settings.weakerModes.contains(mode) else {
            throw AppdError(
                .unsupported, "refusing to launch: \(what)",
                hint: (hint.map { $0 + "; " } ?? "") + "or accept the weaker sandbox with "
                    + "WeakerModes=\(mode.rawValue) in [Sandbox] (then \(effect))")
        }
        weakened.append("\(mode.rawValue): \(what); \(effect)")
    }

    /// For an app on the host network when Landlock cannot scope abstract unix sockets (ABI < 6):
    /// abstract names live in the network namespace, so the host's (D-Bus, X11, systemd's
    /// private sockets ...) are one connect() away. seccomp cannot read the address a
    /// connect() or sendto() names, so it refuses the sockets that could name one: every
    /// socket(AF_UNIX), and socketpair(AF_UNIX) other than SOCK_STREAM (a datagram pair can still
    /// sendto() any address; a connected stream pair can neither connect nor listen again).
    /// Stream socketpairs stay, since libraries use them to wake their own threads.
    static let unscopedUnixSockets: [SeccompRule] = {
        let why = "no Landlock scoping on this kernel: no unix sockets but stream socketpairs"
        let unix: UInt64 = 1  // AF_UNIX
        // SOCK_DGRAM, SOCK_RAW (AF_UNIX makes it a datagram socket), SOCK_SEQPACKET; the type's
        // low 4 bits, whatever SOCK_NONBLOCK/SOCK_CLOEXEC say.
        let pairTypes: [UInt64] = [2, 3, 5]
        return [
            SeccompRule(
                syscall: "socket", action: .errno(EPERM),
                conditions: [.arg(0, .equal, unix)], reason: why)
        ]
            + pairTypes.map {
                SeccompRule(
                    syscall: "socketpair", action: .errno(EPERM),
                    conditions: [
                        .arg(0, .equal, unix),
                        .init(index: 1, op: .maskedEqual, value: $0, mask: 0xF),
                    ],
                    reason: why)
            }
    }()
}
