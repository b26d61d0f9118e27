import AppdBase
import CLinux
import Glibc
import LauncherProtocol
import Sandbox

/// What an engine's config.json may ask of appd-oci (docs/oci-runtime.md, "Narrow, never
/// widen"). The sandbox comes from the bundle's entitlements and the node's appd.conf; the
/// config can only take away: lower memory, pids and cpu limits. Whatever would give the app
/// more than its sandbox — privilege, capabilities beyond an engine's defaults, host devices,
/// host namespaces, writable host folders, sysctls, a user namespace mapping root — is refused
/// with one line naming it. What engines always pass and the sandbox provides itself (their
/// /proc, /dev, /sys mounts, /etc/hosts and resolv.conf, the default capability set) is
/// accepted and not used.
enum OCIConfigCheck {
    /// Docker's and podman's default capability sets (a superset of containerd's CRI default):
    /// a config listing only these asks for nothing, as the app gets none of them anyway.
    static let engineDefaultCapabilities: Set<String> = [
        "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
        "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
        "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
    ]

    /// The device nodes every engine lists and the sandbox's own /dev has.
    static let standardDevices: Set<String> = [
        "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
        "/dev/console", "/dev/ptmx", "/dev/fuse",
    ]

    /// Mount destinations the engines fill with what the sandbox makes itself, or with files
    /// about the container the app does not need (not mounted: the app never sees them).
    static let engineMounts: Set<String> = [
        "/proc", "/dev", "/dev/pts", "/dev/shm", "/dev/mqueue", "/sys", "/sys/fs/cgroup",
        "/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/run/.containerenv",
        "/dev/termination-log", "/run/secrets", "/proc/acpi", "/proc/kcore", "/proc/keys",
        "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
        "/proc/scsi", "/sys/firmware", "/sys/fs/selinux", "/sys/dev/block", "/tmp", "/var/tmp",
        "/run", "/run/lock",
        // Kubernetes' service-account token: the app gets no cluster credentials (a Pod need
        // not set automountServiceAccountToken: false to run).
        "/var/run/secrets/kubernetes.io/serviceaccount",
    ]

    /// The most mounts a config may list (runc's default spec lists 7; a pod with many volumes
    /// a few dozen).
    static let maximumMounts = 1024

    /// Where a volume holding the app's data container is mounted (kept across containers).
    static let dataVolume = "/appd/data"

    /// The namespaces that must be the container's own (listed, so not the host's).
    static let requiredNamespaces = ["pid", "ipc", "uts", "mount", "network"]

    /// Throws naming the first thing `spec` asks that would widen the sandbox. A plain
    /// container (`bundle` given) holds its capabilities, ids and sysctls in namespaces of its
    /// own: any capability, a uid mapping inside its 65,536 ids, a namespaced sysctl, and any
    /// bind mount (a volume, read-only or writable as asked: PlainContainer checks its source)
    /// are accepted for it.
    static func check(_ spec: OCISpec, plainBundle bundle: String? = nil) throws {
        func refuse(_ what: String, _ hint: String? = nil) -> AppdError {
            AppdError(
                .permissionDenied, "config.json asks for \(what), which would widen the sandbox",
                hint: hint ?? "appd-oci narrows a sandbox, never widens it (docs/oci-runtime.md)")
        }
        let asked = spec.process?.capabilities?.all ?? []
        let added = asked.subtracting(engineDefaultCapabilities).sorted()
        if !added.isEmpty && bundle == nil {
            throw refuse(
                "the capabilities \(added.joined(separator: ", "))",
                "a privileged container (--privileged, --cap-add) cannot run under appd-oci")
        }
        // A plain container's devices are PlainContainer's: a host node bound as rootless runc
        // does (reached through its permission bits as the container's unprivileged range),
        // else an inert node on its nodev /dev.
        for device in spec.linux?.devices ?? []
        where bundle == nil && !standardDevices.contains(device.path) {
            throw refuse("the host device \(device.path)", "--device is not supported")
        }
        for (index, namespace) in (spec.linux?.namespaces ?? []).enumerated() {
            guard let path = namespace.path else { continue }
            try checkType(path, namespace.type)
            // A plain container joins its pod's pid, ipc, uts and network namespaces.
            if bundle != nil, joinable.contains(namespace.type) {
                try checkJoinable(
                    podNamespacePath(path, namespace.type), namespace.type,
                    field: "linux.namespaces[\(index)].path")
            }
        }
        for type in requiredNamespaces where spec.namespace(type) == nil {
            throw refuse(
                "the host's \(type) namespace",
                "--\(type == "network" ? "net" : type)=host is not supported")
        }
        // An app's pid, ipc and uts namespaces given by path are not joined: the app gets its
        // own (it sees less, never more). A plain container joins them (checkJoinable). The
        // network namespace is joined: the host's is refused.
        if let path = spec.namespace("network")?.path, isHostNamespace(path, type: "network") {
            throw refuse("the host's network namespace (\(path))")
        }
        if let mount = spec.namespace("mount"), mount.path != nil {
            throw refuse("another process's mount namespace")
        }
        if let user = spec.namespace("user"), user.path != nil {
            throw refuse("another process's user namespace")
        }
        if bundle != nil {
            // The container's ids are 0-65535 on its own host range, whatever the host side
            // of a mapping says; a mapping of ids past them is refused.
            for mapping in (spec.linux?.uidMappings ?? []) + (spec.linux?.gidMappings ?? []) {
                let end = UInt64(mapping.containerID ?? 0) + UInt64(mapping.size ?? 0)
                if end > UInt64(PlainIDRange.size) {
                    throw refuse(
                        "a user namespace mapping past the container's 65536 ids",
                        "a plain container's ids are 0-65535, on a host range appd-oci chooses")
                }
            }
        } else if let mappings = spec.linux?.uidMappings, !mappings.isEmpty {
            throw refuse("a user namespace with uid mappings", "--userns is not supported")
        }
        let foreign = (spec.linux?.sysctl ?? [:]).keys.filter {
            bundle == nil ? !engineSysctls.contains($0) : !ProfileSysctl.isNamespaced($0)
        }
        if let first = foreign.sorted().first {
            throw refuse(
                "the sysctl \(first)",
                bundle == nil
                    ? nil
                    : "a plain container may set namespaced sysctls only: net.*, kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*"
            )
        }
        // Each bind is opened and pinned, each record a mount the launcher makes: bounded.
        if let count = spec.mounts?.count, count > maximumMounts {
            throw AppdError(
                .invalidConfig,
                "config.json lists \(count) mounts; at most \(maximumMounts) are accepted")
        }
        for mount in spec.mounts ?? [] {
            let destination = normalized(mount.destination)
            // A plain container's binds are its volumes (PlainContainer: each source checked
            // by HostPaths, mounted with the host's ids).
            if bundle != nil, mount.isBind { continue }
            if engineMounts.contains(destination) || destination == dataVolume { continue }
            guard mount.isBind else {
                // A tmpfs or another kernel filesystem at a path of the engine's choosing:
                // the sandbox's root is its own, nothing of the host's is given.
                if ["tmpfs", "proc", "sysfs", "devpts", "mqueue", "cgroup", "cgroup2"].contains(
                    mount.type ?? "")
                {
                    continue
                }
                throw refuse("a \(mount.type ?? "untyped") mount at \(destination)")
            }
            throw refuse(
                "the host folder \(mount.source ?? "?") at \(destination)",
                "the app sees its own containers only; a volume at \(dataVolume) holds its data container"
            )
        }
    }

    /// Sysctls engines set by default, about the container's own network namespace only
    /// (docker 20.10: unprivileged ports, ping): accepted and not applied.
    static let engineSysctls: Set<String> = [
        "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ping_group_range",
    ]

    /// Whether the namespace file at `path` is the one the host's PID 1 or appd-oci itself (run
    /// by an engine in the host's namespaces) is in.
    static func isHostNamespace(_ path: String, type: String) -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return isHostNamespace(fd: fd, type: type)
    }

    /// `isHostNamespace` of the namespace open at `fd`.
    static func isHostNamespace(fd: Int32, type: String) -> Bool {
        let file = type == "network" ? "net" : type
        var given = stat()
        guard fstat(fd, &given) == 0 else { return false }
        for owner in ["/proc/1/ns/\(file)", "/proc/self/ns/\(file)"] {
            var host = stat()
            if stat(owner, &host) == 0, given.st_dev == host.st_dev, given.st_ino == host.st_ino {
                return true
            }
        }
        return false
    }

    /// The namespace file at `path` is a namespace of `type` (NS_GET_NSTYPE), or a
    /// one-line error naming both.
    static func checkType(_ path: String, _ type: String) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw AppdError.system("cannot open the \(type) namespace \(path)")
        }
        defer { close(fd) }
        try checkType(fd: fd, path, type)
    }

    /// `checkType` of the namespace open at `fd`.
    static func checkType(fd: Int32, _ path: String, _ type: String) throws {
        let flags: [String: Int32] = [
            "pid": 0x2000_0000, "network": 0x4000_0000, "mount": 0x0002_0000,
            "ipc": 0x0800_0000, "uts": 0x0400_0000, "user": 0x1000_0000, "cgroup": 0x0200_0000,
        ]
        guard let expected = flags[type] else {
            throw AppdError(.invalidConfig, "config.json names an unknown namespace type \(type)")
        }
        let found = ioctl(fd, UInt(0xB703))  // NS_GET_NSTYPE
        guard found == expected else {
            throw AppdError(
                .invalidConfig,
                "config.json's \(type) namespace path \(path) is not a \(type) namespace")
        }
    }

    /// The namespaces a plain container joins by path: its pod's.
    static let joinable: Set<String> = ["pid", "ipc", "uts", "network"]

    /// A namespace a plain container may join by path, or a one-line error naming `field`: a
    /// namespace file (nsfs), not the host's own (PID 1's or appd-oci's), owned by the user
    /// namespace appd-oci and its engine run in — so one the engine made for the pod, or
    /// appd-oci's launcher for the pod's sandbox container — never one another user namespace
    /// owns, whose root could change what the container shares with it (Create refuses an
    /// app's own besides, PodNetwork).
    static func checkJoinable(_ path: String, _ type: String, field: String) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw AppdError.system("cannot open config.json's \(field) \(path)") }
        defer { close(fd) }
        try checkJoinable(fd: fd, path, type, field: field)
    }

    /// The pid namespace a pod's path means: an engine names the pod's as `/proc/PID/ns/pid`
    /// of its sandbox container's `state.pid`, which for a sandbox appd-oci runs is its outer
    /// launcher, in the host's pid namespace; the sandbox's own is that launcher's
    /// `pid_for_children`. Only for a process of a plain appd-oci container (its cgroup marked
    /// `plain`, PodNetwork); any other path is meant as given.
    static func podNamespacePath(_ path: String, _ type: String) -> String {
        guard type == "pid", path.hasPrefix("/proc/"), path.hasSuffix("/ns/pid"),
            let pid = pid_t(path.dropFirst(6).dropLast(7)), pid > 0,
            isHostNamespace(path, type: "pid")
        else { return path }
        let plainIDs =
            PlainIDRange.first...(PlainIDRange.first + PlainIDRange.slots * PlainIDRange.size - 1)
        let member = PodNetwork.member(
            pid, unified: CgroupLayout.detect().unified, appUIDs: [], plainIDs: plainIDs)
        return member == .plain ? "/proc/\(pid)/ns/pid_for_children" : path
    }

    /// `checkJoinable` of the namespace open at `fd`: what is checked is what is joined.
    static func checkJoinable(fd: Int32, _ path: String, _ type: String, field: String) throws {
        // NSFS_MAGIC, of the file open at `fd` (Swift's Glibc has no fstatfs).
        guard appd_filesystem_type("/proc/self/fd/\(fd)") == 0x6E73_6673 else {
            throw AppdError(
                .invalidConfig, "config.json's \(field) \(path) is not a namespace file (nsfs)")
        }
        if isHostNamespace(fd: fd, type: type) {
            throw AppdError(
                .permissionDenied,
                "config.json's \(field) \(path) is the host's \(type) namespace, which would widen the sandbox"
            )
        }
        let owner = ioctl(fd, UInt(0xB701))  // NS_GET_USERNS
        guard owner >= 0 else {
            throw AppdError.system("cannot read the owner of config.json's \(field) \(path)")
        }
        defer { close(owner) }
        var ownerInfo = stat()
        var ours = stat()
        guard fstat(owner, &ownerInfo) == 0, stat("/proc/self/ns/user", &ours) == 0,
            ownerInfo.st_dev == ours.st_dev, ownerInfo.st_ino == ours.st_ino
        else {
            throw AppdError(
                .permissionDenied,
                "config.json's \(field) \(path) is owned by another user namespace: a plain container joins only its pod's namespaces, made by its engine or appd-oci"
            )
        }
    }

    /// `/a//b/` → `/a/b`.
    static func normalized(_ path: String) -> String {
        "/" + path.split(separator: "/").joined(separator: "/")
    }
}
