import AppdBase
import AppdConfig
import CLinux
import Foundation
import Glibc
import LauncherProtocol
import Sandbox

/// A container without a `.app` (docs/oci-runtime.md, "Plain containers"): only with the
/// opt-in (`--plain`, `org.appd.plain=true`) or as a pod's sandbox ("pause") container.
///
/// Its root is a user namespace's root: the process runs in a user namespace of its own whose
/// ids 0–65535 are a range of 65,536 unprivileged host ids no one else has (`PlainIDRange`).
/// Inside, the config holds as runc applies it — `process.user`, the five capability sets,
/// `noNewPrivileges`, `rlimits`, `hostname`, `cwd`, `env`, `args`, the kernel filesystems of
/// `mounts`, masked and read-only paths, namespaced sysctls. On the host it is that range:
/// unmapped, with no capability in the initial namespace. What stays: seccomp's deny list
/// (no mount, unshare, setns, BPF...), Landlock over the container's own tree, no host
/// namespaces, no host devices, volumes only with the host's ids (never idmapped, never a
/// system folder writable), limits that only narrow.
enum PlainContainer {
    /// Ids a plain container has inside its user namespace.
    static let idCount = PlainIDRange.size

    static func profile(
        spec: OCISpec, bundle: String, root: HostPaths.Opened, stateDirectory: String,
        stateRoot: String, config: AppdConfiguration, console: Bool, hostID: UInt32,
        podFiles: [PodFiles.File] = [], log: OCILog
    ) throws -> PreparedSandbox {
        // The binds' sources, opened once and given to the launcher by fd (HostPaths).
        var held: [HostPaths.Opened] = []
        do {
            return try profile(
                spec: spec, bundle: bundle, root: root, stateDirectory: stateDirectory,
                stateRoot: stateRoot, config: config, console: console, hostID: hostID,
                podFiles: podFiles, log: log, held: &held)
        } catch {
            for opened in held { opened.close() }
            throw error
        }
    }

    private static func profile(
        spec: OCISpec, bundle: String, root: HostPaths.Opened, stateDirectory: String,
        stateRoot: String, config: AppdConfiguration, console: Bool, hostID: UInt32,
        podFiles: [PodFiles.File], log: OCILog, held: inout [HostPaths.Opened]
    ) throws -> PreparedSandbox {
        let rootfs = root.path
        guard let args = spec.process?.args, let first = args.first else {
            throw AppdError(.invalidConfig, "config.json has no process.args")
        }
        let user = try user(of: spec)
        let environment = spec.process?.env ?? []
        let path =
            environment.first { $0.hasPrefix("PATH=") }.map { String($0.dropFirst(5)) }
            ?? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        let executable = try resolve(first, path: path, rootfs: rootfs)

        // A scratch home nobody reads: the compile wants a data container.
        let parent = try FileDescriptor.directory(stateDirectory)
        let name = UUID().uuidString
        try DataContainer.create(in: parent, name: name, uid: hostID, gid: hostID)
        let home = "\(stateDirectory)/\(name)"
        var settings = config.sandbox
        settings.requireAppSandboxEntitlement = false
        let subject = SandboxSubject(
            bundleID: "org.appd.plain", name: "plain", bundleContainer: rootfs,
            bundlePath: rootfs, executable: "\(rootfs)\(executable)", dataContainer: home,
            uid: hostID, gid: hostID, entitlements: .init(values: [:]), groupContainers: [])
        var profile = try SandboxPolicy.compile(
            subject, settings: settings, kernel: .detect(), console: console)

        // The container's own tree: its root, then the config's mounts in its order, then
        // masked and read-only paths.
        var tree = Tree(configMounts: spec.mounts ?? [])
        let overlay = try tree.root(
            root, readOnly: spec.root?.readonly ?? false, stateDirectory: stateDirectory,
            stateRoot: stateRoot, podFiles: podFiles, log: log, profile: &profile, held: &held)
        for mount in tree.configMounts {
            try tree.add(
                mount, rootfs: rootfs, stateRoot: stateRoot, podFiles: podFiles, log: log,
                held: &held)
        }
        tree.mounts += try devices(spec.linux?.devices ?? [], hostID: hostID)
        for masked in spec.linux?.maskedPaths ?? [] where masked.hasPrefix("/") {
            tree.mounts.append(.at(OCIConfigCheck.normalized(masked), .mask))
        }
        for readOnly in spec.linux?.readonlyPaths ?? [] where readOnly.hasPrefix("/") {
            tree.mounts.append(.at(OCIConfigCheck.normalized(readOnly), .roPath))
        }
        profile.mounts = tree.mounts
        profile.landlock.paths = tree.landlock
        // As runc: no memory limit unless the engine sets one (OCILimits applies it, within
        // the node's [OCI] ceiling); [Sandbox] MemoryMax= is the apps' default.
        profile.cgroupLimits.memoryMax = nil

        profile.uid = user.uid
        profile.gid = user.gid
        profile.groups = user.groups
        profile.userNamespace = .init(hostUID: hostID, hostGID: hostID, count: idCount)
        profile.capabilities = capabilitySets(spec.process?.capabilities, log: log)
        if spec.process?.noNewPrivileges != true { profile.newPrivileges = true }
        profile.rlimits = try rlimits(spec.process?.rlimits ?? [], over: profile.rlimits)
        let sysctls = (spec.linux?.sysctl ?? [:]).sorted { $0.key < $1.key }
        if !sysctls.isEmpty {
            profile.sysctls = sysctls.map { SandboxProfile.Sysctl(name: $0.key, value: $0.value) }
        }
        if spec.linux?.seccomp != nil {
            log.warning(
                "linux.seccomp is not applied: a plain container runs under appd's seccomp deny list"
            )
        }

        profile.executable = executable
        profile.arguments = args
        profile.workingDirectory = spec.process?.cwd ?? "/"
        profile.environment = OCIRuntime.extraEnvironment(environment, reserved: [])
        if !profile.environment.contains(where: { $0.name == "PATH" }) {
            profile.environment.append(.init(name: "PATH", value: path))
        }
        if let hostname = spec.hostname, !hostname.isEmpty { profile.hostname = hostname }
        return PreparedSandbox(
            profile: profile, bundleID: nil, dataContainer: home, dataInVolume: false, held: held,
            overlay: overlay.map { ($0, hostID) })
    }

    /// The most `linux.devices` a config may list.
    static let maximumDevices = 256

    /// `linux.devices` (those beyond the default set, which /dev has already), each under
    /// `/dev`: the host's node at the same path, when it is one of the same type and numbers,
    /// bound as rootless runc binds it — the container opens it only as its unprivileged range
    /// may, through the node's permission bits (a host file it does not own is nobody's to
    /// it) — else a node made on the container's nodev /dev with the config's type, numbers,
    /// mode and owner, which shows what the config asked and can never be opened as a device.
    /// A fifo is made as asked. Refused at `create`, naming the field: a path outside /dev or
    /// with `..`, an unknown type, numbers past the kernel's, an owner past the container's ids.
    static func devices(_ devices: [OCISpec.Device], hostID: UInt32) throws -> [SandboxProfile
        .Mount]
    {
        guard devices.count <= maximumDevices else {
            throw AppdError(
                .invalidConfig,
                "config.json lists \(devices.count) linux.devices; at most \(maximumDevices) are accepted"
            )
        }
        var mounts: [SandboxProfile.Mount] = []
        for (index, device) in devices.enumerated()
        where !OCIConfigCheck.standardDevices.contains(device.path) {
            let field = "linux.devices[\(index)]"
            let path = OCIConfigCheck.normalized(device.path)
            guard path.hasPrefix("/dev/"), !path.split(separator: "/").contains(".."),
                !["/dev/pts", "/dev/shm", "/dev/mqueue"].contains(where: {
                    HostPaths.overlap(path, $0)
                })
            else {
                throw AppdError(
                    .invalidConfig,
                    "config.json's \(field) path \(device.path) is not a node of its own below /dev"
                )
            }
            let types: [String: Character] = ["c": "c", "u": "c", "b": "b", "p": "p"]
            guard let type = types[device.type ?? ""] else {
                throw AppdError(
                    .invalidConfig,
                    "config.json's \(field) type '\(device.type ?? "")' is not c, u, b or p")
            }
            let major = device.major ?? 0
            let minor = device.minor ?? 0
            guard (0...0xFFF).contains(major), (0...0xF_FFFF).contains(minor) else {
                throw AppdError(
                    .invalidConfig,
                    "config.json's \(field) numbers \(major):\(minor) are past the kernel's")
            }
            let uid = device.uid ?? 0
            let gid = device.gid ?? 0
            guard uid < idCount, gid < idCount else {
                throw AppdError(
                    .invalidConfig,
                    "config.json's \(field) owner \(uid):\(gid) is past the container's ids (0-\(idCount - 1))"
                )
            }
            if type != "p", hostNode(path, type: type, major: major, minor: minor) {
                mounts.append(.devBind(path))
                continue
            }
            mounts.append(
                .node(
                    path, type: type, major: UInt32(major), minor: UInt32(minor),
                    mode: (device.fileMode ?? 0o666) & 0o777, uid: hostID + uid, gid: hostID + gid))
        }
        return mounts
    }

    /// Whether the host's `path` is itself (not a link to) a device node of `type` with these
    /// numbers.
    private static func hostNode(_ path: String, type: Character, major: Int64, minor: Int64)
        -> Bool
    {
        var info = stat()
        guard lstat(path, &info) == 0 else { return false }
        let kind = info.st_mode & S_IFMT
        guard kind == (type == "b" ? S_IFBLK : S_IFCHR) else { return false }
        let device = UInt64(info.st_rdev)
        let hostMajor = Int64((device >> 8) & 0xFFF)
        let hostMinor = Int64((device & 0xFF) | ((device >> 12) & 0xF_FF00))
        return hostMajor == major && hostMinor == minor
    }

    /// config.json's `process.user`, within the container's ids (0 to `idCount` - 1).
    static func user(of spec: OCISpec) throws -> (uid: UInt32, gid: UInt32, groups: [UInt32]) {
        let user = spec.process?.user
        let (uid, gid, groups) = (user?.uid ?? 0, user?.gid ?? 0, user?.additionalGids ?? [])
        for id in [uid, gid] + groups where id >= idCount {
            throw AppdError(
                .invalidConfig,
                "config.json's process.user holds the id \(id); a plain container has the ids 0-\(idCount - 1)"
            )
        }
        return (uid, gid, groups)
    }

    /// The config's capability sets, as runc takes them: a name this kernel's list does not
    /// hold is left out, and so is an ambient capability the kernel would refuse to raise (not
    /// in both the permitted and inheritable sets: `runc spec`'s default lists no inheritable
    /// set), each with a warning, not a failed start.
    static func capabilitySets(_ caps: OCISpec.Capabilities?, log: OCILog)
        -> SandboxProfile.CapabilitySets
    {
        if let unknown = caps?.all.filter({ ProfileCapability.number($0) == nil }).sorted(),
            !unknown.isEmpty
        {
            log.warning("ignoring unknown capabilities: \(unknown.joined(separator: ", "))")
        }
        func known(_ names: [String]?) -> [String] {
            (names ?? []).filter { ProfileCapability.number($0) != nil }
        }
        var sets = SandboxProfile.CapabilitySets()
        sets.bounding = known(caps?.bounding)
        sets.effective = known(caps?.effective)
        sets.permitted = known(caps?.permitted)
        sets.inheritable = known(caps?.inheritable)
        let raisable = Set(sets.permitted).intersection(sets.inheritable)
        let ambient = known(caps?.ambient)
        sets.ambient = ambient.filter(raisable.contains)
        let unraisable = ambient.filter { !raisable.contains($0) }
        if !unraisable.isEmpty {
            log.warning(
                "not raising ambient capabilities outside the permitted and inheritable sets: \(unraisable.joined(separator: ", "))"
            )
        }
        return sets
    }

    /// A plain container's own tree as it is built: the mounts in order, and the Landlock
    /// rule of each place the container may read or write.
    struct Tree {
        let configMounts: [OCISpec.Mount]
        /// Where the config mounts something of its own.
        let destinations: Set<String>
        var mounts: [SandboxProfile.Mount] = []
        var landlock: [LandlockRules.PathRule] = []
        /// The root is the container's own (idmapped, or an overlay), not the tmpfs layout.
        var ownRoot = false

        init(configMounts: [OCISpec.Mount]) {
            self.configMounts = configMounts
            destinations = Set(configMounts.map { OCIConfigCheck.normalized($0.destination) })
        }

        /// The root is the image's rootfs idmapped onto the container's ids where its
        /// filesystem allows (runc's root, writable unless root.readonly); an engine's
        /// overlay snapshot is a writable overlay of its layers idmapped read-only, its upper
        /// layer in the state folder (OverlayRoot; MountPins mounts it; Linux 5.19); elsewhere
        /// a tmpfs with the image's top level bound read-only on it and a private /tmp. Then
        /// the /proc and /dev appd-exec needs, unless the config mounts its own. Returns the
        /// overlay, if it is one.
        mutating func root(
            _ root: HostPaths.Opened, readOnly: Bool, stateDirectory: String, stateRoot: String,
            podFiles: [PodFiles.File], log: OCILog, profile: inout SandboxProfile,
            held: inout [HostPaths.Opened]
        ) throws -> OverlayRoot? {
            let rootfs = root.path
            let idmapped = PlainContainer.allowsIdmappedRoot(rootfs)
            if idmapped {
                profile.imageRoot = .init(source: root.source, readOnly: readOnly)
                landlock.append(.init(access: readOnly ? .rx : .rwx, path: "/"))
            }
            var overlay: OverlayRoot?
            if !idmapped && !readOnly && PlainContainer.kernelAllowsIdmappedLayers()
                && OverlayRoot.canHoldUpper(stateDirectory)
            {
                overlay = OverlayRoot.layers(of: root, stateRoot: stateRoot)
            }
            if let overlay {
                held += overlay.layers
                profile.imageRoot = .init(
                    source: OverlayRoot.placeholder, readOnly: false, owned: true)
                landlock.append(.init(access: .rwx, path: "/"))
            }
            ownRoot = idmapped || overlay != nil
            if !ownRoot {
                // The launcher makes mount points in an idmapped root or the overlay (as the
                // container's root); the image's folders bound read-only need theirs made
                // here, as runc makes them.
                PodFiles.makeMountPoints(podFiles, in: rootfs, log: log)
                // The tmpfs root holds nothing but the container's own tree: `ls /` lists it,
                // as under runc (the folders below keep their own, narrower rules for writing).
                landlock.append(.init(access: .ro, path: "/"))
                imageTopLevel(root)
            }
            if !destinations.contains("/tmp") && (!ownRoot || readOnly) {
                mounts.append(.tmpfs("/tmp", mode: 0o1777))
                landlock.append(.init(access: .rw, path: "/tmp"))
            }
            // appd-exec needs a procfs (the user namespace's maps are written through it) and
            // the default devices; a config without them gets the sandbox's own.
            if !destinations.contains("/proc") { mounts.append(.at("/proc", .proc)) }
            if !destinations.contains("/dev") { mounts.append(.at("/dev", .dev)) }
            landlock.append(.init(access: .ro, path: "/proc"))
            landlock.append(.init(access: .rw, path: "/dev"))
            return overlay
        }

        /// The image's top level on the tmpfs root: each folder and file bound read-only, each
        /// symlink made again; not proc, dev, sys and tmp (the container's own).
        private mutating func imageTopLevel(_ root: HostPaths.Opened) {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
            for entry in names.sorted() where !["proc", "dev", "sys", "tmp"].contains(entry) {
                let source = "\(root.path)/\(entry)"
                var info = stat()
                guard lstat(source, &info) == 0 else { continue }
                switch info.st_mode & S_IFMT {
                case S_IFLNK:
                    if let target = try? FileManager.default.destinationOfSymbolicLink(
                        atPath: source)
                    {
                        mounts.append(.symlink(target, at: "/\(entry)"))
                    }
                case S_IFDIR, S_IFREG:
                    var bind = SandboxProfile.Mount.roBind("\(root.source)/\(entry)")
                    bind.destination = "/\(entry)"
                    mounts.append(bind)
                    landlock.append(.init(access: .rx, path: "/\(entry)"))
                default: continue
                }
            }
        }

        /// One of the config's mounts: the pod's resolv.conf, hosts or hostname file
        /// (PodFiles checked it) read-only; an engine's volume bound as runc binds it; a
        /// kernel filesystem. procfs and sysfs are the container's own: nothing is bound into
        /// them.
        mutating func add(
            _ mount: OCISpec.Mount, rootfs: String, stateRoot: String, podFiles: [PodFiles.File],
            log: OCILog, held: inout [HostPaths.Opened]
        ) throws {
            let destination = OCIConfigCheck.normalized(mount.destination)
            let options = mount.options ?? []
            if mount.isBind, let file = podFiles.first(where: { $0.destination == destination }) {
                var bind = SandboxProfile.Mount.roBind(file.source)
                bind.destination = destination
                mounts.append(bind)
                return
            }
            if mount.isBind {
                guard let source = mount.source,
                    !["/proc", "/sys"].contains(where: { HostPaths.overlap(destination, $0) })
                else { return }
                try bindVolume(
                    source, at: destination, readOnly: mount.isReadOnly,
                    noexec: options.contains("noexec"), rootfs: rootfs, stateRoot: stateRoot,
                    log: log, held: &held)
                return
            }
            guard let type = mount.type else { return }
            if type == "cgroup" {
                // cgroup v1 needs a hierarchy per controller (runc mounts a tmpfs of binds):
                // not made; said in the log.
                log.warning("the cgroup (v1) mount at \(destination) is not made")
                return
            }
            mounts.append(
                .fs(
                    type, source: mount.source ?? type, at: destination,
                    options: options.joined(separator: ",")))
            let writable = !options.contains("ro") && type != "proc" && type != "sysfs"
            landlock.append(.init(access: writable ? .rw : .ro, path: destination))
        }

        /// The engine's volumes (emptyDir, configMap, secret, PVC, `podman -v`) as runc mounts
        /// them, with the host's ids: the container's unprivileged range writes where the
        /// folder lets it, nothing is idmapped. Never appd's own state, whatever folder holds
        /// it; a writable one never a system folder either. What was checked is what is
        /// mounted (by its fd). As runc: executable unless the bind says noexec (an init
        /// container copies a tool into an emptyDir for the next to run).
        private mutating func bindVolume(
            _ source: String, at destination: String, readOnly: Bool, noexec: Bool,
            rootfs: String, stateRoot: String, log: OCILog, held: inout [HostPaths.Opened]
        ) throws {
            let opened = try HostPaths.open(
                source, what: "the bind source for \(destination)", stateRoot: stateRoot,
                system: !readOnly)
            held.append(opened)
            let made =
                try ownRoot
                || PlainContainer.makeMountPoint(for: opened, at: destination, in: rootfs, log: log)
            guard made else { return }
            var bind =
                readOnly
                ? SandboxProfile.Mount.roBind(opened.source)
                : noexec
                    ? SandboxProfile.Mount.rwBind(opened.source)
                    : SandboxProfile.Mount.rwBindExec(opened.source)
            bind.destination = destination
            mounts.append(bind)
            landlock.append(.init(access: readOnly ? .rx : noexec ? .rw : .rwx, path: destination))
        }
    }

    /// The config's rlimits (`RLIMIT_NOFILE`...) over the sandbox's: each one the config names
    /// is set as given. Lowering always works; a hard limit above appd-oci's own needs
    /// CAP_SYS_RESOURCE, which root lacks on some hosts: refused here, at create, as runc fails.
    static func rlimits(
        _ asked: [OCISpec.Rlimit], over base: [SandboxProfile.ResourceLimit]
    ) throws -> [SandboxProfile.ResourceLimit] {
        var limits = base
        for limit in asked.prefix(64) {
            let type = limit.type.uppercased()
            guard type.hasPrefix("RLIMIT_") else {
                throw AppdError(.invalidConfig, "config.json's rlimit \(limit.type) is unknown")
            }
            let name = String(type.dropFirst("RLIMIT_".count)).lowercased()
            let resource = appd_rlimit_resource(name)
            guard resource >= 0 else {
                throw AppdError(.invalidConfig, "config.json's rlimit \(limit.type) is unknown")
            }
            guard limit.soft <= limit.hard else {
                throw AppdError(
                    .invalidConfig, "config.json's rlimit \(limit.type): soft above hard")
            }
            var soft: UInt64 = 0
            var hard: UInt64 = 0
            if appd_getrlimit(resource, &soft, &hard) == 0, limit.hard > hard,
                !Self.holdsSysResource()
            {
                throw AppdError(
                    .permissionDenied,
                    "cannot raise \(type) to \(limit.hard): the hard limit here is \(hard) and appd-oci lacks CAP_SYS_RESOURCE",
                    hint: "ask for a hard limit of at most \(hard) (podman: --ulimit)")
            }
            let value = { (number: UInt64) -> UInt64? in
                number == UInt64.max ? nil : number
            }
            limits.removeAll { $0.name == name }
            limits.append(.init(name: name, soft: value(limit.soft), hard: value(limit.hard)))
        }
        return limits
    }

    /// Whether this process's effective set holds CAP_SYS_RESOURCE (24).
    static func holdsSysResource() -> Bool {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
            let bits = UInt64(
                line.dropFirst("CapEff:".count).trimmingCharacters(in: .whitespaces), radix: 16)
        else { return false }
        return bits & (1 << 24) != 0
    }

    /// Whether `rootfs` can be the root, idmapped: a directory on a filesystem that allows
    /// idmapped mounts on this kernel (ext4 and xfs since 5.12, btrfs 5.15, tmpfs 6.3). Not
    /// overlayfs: no kernel idmaps a merged overlay (only its layers, before the merge).
    static func allowsIdmappedRoot(_ rootfs: String) -> Bool {
        // The clone takes the mounts below the root along, and the idmap would reach them:
        // only the root filesystem itself is idmapped.
        guard !RootFilesystem.hasSubmounts(rootfs) else { return false }
        let type = appd_filesystem_type(rootfs)
        let release =
            (try? String(contentsOfFile: "/proc/sys/kernel/osrelease", encoding: .utf8)) ?? ""
        switch type {
        case 0xEF53, 0x5846_5342: return kernelAtLeast(release, (5, 12))  // ext2/3/4, xfs
        case 0x9123_683E: return kernelAtLeast(release, (5, 15))  // btrfs
        case 0x0102_1994: return kernelAtLeast(release, (6, 3))  // tmpfs
        default: return false
        }
    }

    /// Makes the mount point of a bind at `destination` in the image's `rootfs` (the tmpfs
    /// layout binds the image's folders read-only, where the launcher could not), as runc
    /// makes one: a folder or an empty file like `source`, each folder on the way made where
    /// missing (0755, the host's root's), never through a link. A destination whose top-level
    /// folder the image lacks, or that the launcher makes itself (`/dev`, `/proc`, `/sys`,
    /// `/tmp`), needs none here. False (with a warning) when an engine's file about the
    /// container (`/run/.containerenv`...) cannot have one: it is not mounted; a volume that
    /// cannot is an error.
    static func makeMountPoint(
        for source: HostPaths.Opened, at destination: String, in rootfs: String, log: OCILog
    ) throws -> Bool {
        let parts = destination.split(separator: "/").map(String.init)
        var info = stat()
        guard let top = parts.first, !["proc", "dev", "sys", "tmp"].contains(top),
            lstat("\(rootfs)/\(top)", &info) == 0
        else { return true }
        let directory = fstat(source.fd, &info) != 0 || info.st_mode & S_IFMT == S_IFDIR
        var folder = open(rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        var failure: Int32 = folder < 0 ? errno : 0
        for (index, part) in parts.enumerated() where failure == 0 {
            let last = index == parts.count - 1
            if !last || directory {
                if mkdirat(folder, part, 0o755) != 0 && errno != EEXIST { failure = errno }
            }
            guard failure == 0 else { break }
            let flags = last && !directory ? O_RDONLY | O_CREAT : O_RDONLY | O_DIRECTORY
            let next = appd_open_beneath(folder, part, flags, 0o644)
            if next < 0 { failure = errno }
            close(folder)
            folder = next
        }
        if folder >= 0 { close(folder) }
        guard failure != 0 else { return true }
        let text =
            "the mount point \(destination) cannot be made in the image (\(errnoText(failure)))"
        if OCIConfigCheck.engineMounts.contains(destination) {
            log.warning("\(text); the engine's bind there is not mounted")
            return false
        }
        throw AppdError(
            .invalidConfig, text,
            hint:
                "a volume's mount point is a folder or file of the image, made where missing; never a link"
        )
    }

    /// Whether overlayfs takes idmapped layers here (Linux 5.19).
    static func kernelAllowsIdmappedLayers() -> Bool {
        let release =
            (try? String(contentsOfFile: "/proc/sys/kernel/osrelease", encoding: .utf8)) ?? ""
        return kernelAtLeast(release, (5, 19))
    }

    /// `args[0]` as a path inside the image: absolute as given, else the first match in PATH.
    static func resolve(_ name: String, path: String, rootfs: String) throws -> String {
        if name.hasPrefix("/") { return name }
        for directory in path.split(separator: ":") where directory.hasPrefix("/") {
            let candidate = "\(directory)/\(name)"
            if access("\(rootfs)\(candidate)", X_OK) == 0 { return candidate }
        }
        throw AppdError(.notFound, "\(name) is not in the image's PATH (\(path))")
    }
}
