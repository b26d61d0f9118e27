import CLinux
import Glibc

/// Builds the new root in PID 1, inside the mount namespace the launcher unshared (the profile
/// is refused earlier if it mounts without `unshare mount`, so nothing here can touch the
/// caller's mounts).
///
/// One `pivot_root`, as runc does (each pivot_root walks every task on the host to move the
/// ones rooted in the old root, `chroot_fs_refs`: at 1,000 instances that was the launcher's
/// single largest cost). Before any mount, every bind source and /dev node is cloned with
/// `open_tree(OPEN_TREE_CLONE)`: opened from the host root, where nothing hides it (not the
/// tmpfs about to cover `/tmp`) and where an absolute symlink in it resolves, and kept as a
/// detached copy that no later mount can change. Then a tmpfs on `/tmp` becomes the root
/// (`pivot_root(".", ".")`, the host root detached at once) and the records are applied inside
/// it, so nothing of the host is reachable while they are, and a symlink met on a destination's
/// way (the profile's own, or one an app left in a rw-bind) resolves inside the new root. The
/// clones are moved into place with `move_mount`.
///
/// Kernels before 5.2 (no open_tree) get the layout of bubblewrap: the scratch tmpfs becomes the
/// root for a moment with the host below it at `/oldroot`, the new root is built at `/newroot`
/// from sources read under `/oldroot`, then the host is detached and a second pivot enters
/// `/newroot`.
///
/// Shared namespaces (docs/launcher-protocol.md): `--template` builds the same root with
/// `phase: .template`, which leaves out what must be each instance's own (procfs, tied to the
/// instance's pid namespace; /dev/shm; devpts) but creates their mount points, then `seal`s
/// it. A launch that joins such a template runs `mountInstanceParts` on its private copy.
struct Mounts {
    let profile: Profile
    var phase = Phase.whole
    /// `root image`: the user namespace whose ids the image root is idmapped onto.
    var idmapUserNamespace: Int32 = -1

    enum Phase {
        /// Everything: a launch that builds its own root.
        case whole
        /// The app's shared root: no procfs, no /dev/shm tmpfs, no devpts.
        case template
    }

    private static let scratch = "/tmp"
    private static let oldRoot = "/oldroot"
    private static let newRoot = "/newroot"
    private static let deviceNodes = ["null", "zero", "full", "random", "urandom", "tty"]

    /// What a record takes from the host, taken before any mount.
    private enum Source {
        case none
        /// A bind's source: a detached clone (`fd`), or the resolved host path (fallback).
        case tree(fd: Int32, path: String)
        case path(String)
        /// A missing `ro-bind-try` source.
        case missing
        /// The host's /dev nodes, cloned, in `deviceNodes` order (the fallback binds by path).
        case devices(UnsafeMutablePointer<Int32>)
    }

    func build() throws {
        try sys(
            mount(nil, "/", nil, UInt(MS_REC | MS_PRIVATE), nil), "mount",
            "cannot make / rprivate")
        // A raw allocation, not an Array: each new Array element type is a runtime metadata
        // lookup, paid on every launch.
        let count = profile.mounts.count
        // Every clone stays an open fd until its record is applied: make room for them (a
        // `dev` record takes 6), and give the app process the limit PID 1 had.
        let nofile = appd_rlimit_resource("nofile")
        var soft: UInt64 = 0
        var hard: UInt64 = 0
        let needed = UInt64(count) * UInt64(Self.deviceNodes.count) + 64
        var raised = false
        if appd_getrlimit(nofile, &soft, &hard) == 0, soft < needed, soft < hard {
            raised = appd_setrlimit(nofile, min(needed, hard), hard) == 0
        }
        defer { if raised { _ = appd_setrlimit(nofile, soft, hard) } }
        let sources = UnsafeMutablePointer<Source>.allocate(capacity: count)
        sources.initialize(repeating: .none, count: count)
        defer {
            Self.close(sources, count)
            sources.deinitialize(count: count)
            sources.deallocate()
        }
        do {
            for index in 0..<count { sources[index] = try clone(profile.mounts[index]) }
        } catch let failure as LaunchFailure where failure.errno == ENOSYS {
            // Before Linux 5.2: no open_tree.
            Self.close(sources, count)
            guard profile.imageRoot == nil else {
                throw LaunchFailure(
                    "root", "an image root needs open_tree (Linux 5.2) and idmapped mounts (5.12)")
            }
            return try buildWithScratchRoot(sources)
        }

        if let image = profile.imageRoot {
            try mountImageRoot(image, on: Self.scratch)
        } else {
            try mountTmpfs(Self.scratch, mode: 0o755, step: "root")
        }
        try sys(chdir(Self.scratch), "pivot_root", "chdir \(Self.scratch)")
        // pivot_root(".", ".") stacks the host root on top of the new one; detaching "." then
        // removes it (pivot_root(2), "NOTES").
        try sys(appd_pivot_root(".", "."), "pivot_root", "cannot pivot into the new root")
        try sys(umount2(".", Int32(MNT_DETACH)), "pivot_root", "cannot detach the host root")
        try sys(chdir("/"), "pivot_root", "chdir /")

        // Through the idmapped image root only the container's ids can create files (the
        // host's root is no id of its mapping: EOVERFLOW). The mount points and files the
        // records make there are made as the container's root, so they are stored as the
        // image's root; the fs capabilities drop meanwhile, so the image's permissions hold
        // for them as they would for the container's root.
        let asContainerRoot = profile.imageRoot != nil ? profile.userNamespace : nil
        if let map = asContainerRoot { try Self.setFilesystemIDs(uid: map.uid, gid: map.gid) }
        for index in 0..<count {
            if case .node = profile.mounts[index], let map = asContainerRoot {
                // mknod needs CAP_MKNOD, which a non-zero fsuid clears: the host's root makes
                // the node (on a nodev mount) and gives it to its owner.
                try Self.setFilesystemIDs(uid: 0, gid: 0)
                try apply(profile.mounts[index], source: sources[index], root: "")
                try Self.setFilesystemIDs(uid: map.uid, gid: map.gid)
                continue
            }
            try apply(profile.mounts[index], source: sources[index], root: "")
        }
        if asContainerRoot != nil { try Self.setFilesystemIDs(uid: 0, gid: 0) }
        if profile.imageRoot?.readOnly == true {
            // As runc: the root becomes read-only once everything is mounted on it.
            let flags = UInt(MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NODEV)
            try sys(
                mount(nil, "/", nil, flags, nil), "root", "cannot make the image root read-only")
        }
    }

    /// A plain container's root: its rootfs cloned (with the mounts below it), idmapped onto
    /// (unless `owned`: appd-oci's overlay, moved as it is) the container's user namespace (`idmapUserNamespace`: an on-disk id k is the
    /// container's k), nodev, moved onto `target`. Its files stay the image's: written by the
    /// container's root they are stored as the image's root, and no id outside the mapping can
    /// be written through it.
    private func mountImageRoot(_ image: ImageRoot, on target: String) throws {
        guard idmapUserNamespace >= 0 else {
            throw LaunchFailure("root", "an image root needs its idmapping's user namespace")
        }
        let tree = appd_open_tree_clone(image.source, 1)
        try sys(tree, "root", "cannot clone the image root \(image.source)")
        defer { Glibc.close(tree) }
        if image.owned {
            // appd-oci's overlay over layers idmapped onto the same range, mounted nodev.
            try sys(appd_move_mount_onto(tree, target), "root", "cannot mount the image root")
            return
        }
        guard appd_mount_setattr_idmap(tree, idmapUserNamespace, APPD_MOUNT_ATTR_NODEV) == 0 else {
            throw LaunchFailure(
                "root",
                "cannot idmap the image root \(image.source) (its filesystem, or one mounted below it, may not allow idmapped mounts)",
                errno: errno)
        }
        try sys(appd_move_mount_onto(tree, target), "root", "cannot mount the image root")
    }

    private static func setFilesystemIDs(uid: UInt32, gid: UInt32) throws {
        try sys(appd_setfsids(uid, gid), "root", "cannot set the filesystem ids to \(uid):\(gid)")
    }

    /// Masked and read-only paths, applied by PID 1 once the root is built and after the
    /// writes it makes through /proc/sys (sysctls, vm.memfd_noexec): a read-only /proc/sys
    /// would refuse them.
    func restrictPaths() throws {
        for record in profile.mounts {
            switch record {
            case .mask(let destination): try mask(destination, destination, root: "")
            case .readOnlyPath(let destination): try makeReadOnly(destination, destination)
            default: continue
            }
        }
    }

    /// The bubblewrap layout, for kernels without open_tree: two pivots.
    private func buildWithScratchRoot(_ sources: UnsafeMutablePointer<Source>) throws {
        // Resolve the bind sources on the host first: an absolute symlink in a source must
        // resolve against the host root, not against the scratch root.
        let count = profile.mounts.count
        for index in 0..<count { sources[index] = try resolveSource(profile.mounts[index]) }

        try mountTmpfs(Self.scratch, mode: 0o755, step: "root")
        try sys(mkdir(Self.scratch + Self.oldRoot, 0o755), "root", "cannot create oldroot")
        try sys(mkdir(Self.scratch + Self.newRoot, 0o755), "root", "cannot create newroot")
        try mountTmpfs(Self.scratch + Self.newRoot, mode: 0o755, step: "root")
        try sys(
            appd_pivot_root(Self.scratch, Self.scratch + Self.oldRoot), "pivot_root",
            "cannot pivot into the scratch root")
        try sys(chdir("/"), "pivot_root", "chdir /")

        for index in 0..<count {
            try apply(profile.mounts[index], source: sources[index], root: Self.newRoot)
        }

        // The mounts that needed the host (binds, proc) are done; nothing of the host may stay
        // reachable.
        try sys(
            umount2(Self.oldRoot, Int32(MNT_DETACH)), "pivot_root", "cannot detach the old root")
        try sys(chdir(Self.newRoot), "pivot_root", "chdir \(Self.newRoot)")
        try sys(appd_pivot_root(".", "."), "pivot_root", "cannot pivot into the new root")
        try sys(umount2(".", Int32(MNT_DETACH)), "pivot_root", "cannot detach the scratch root")
        try sys(chdir("/"), "pivot_root", "chdir /")
    }

    /// Clones what `record` needs of the host. ENOSYS (no open_tree) is thrown as it is, for
    /// `build` to fall back.
    private func clone(_ record: MountRecord) throws -> Source {
        switch record {
        case .bind(let kind, let source, _):
            let fd = appd_open_tree_clone(source, 1)
            guard fd >= 0 else {
                if errno == ENOENT && kind == .readOnlyTry { return .missing }
                throw LaunchFailure.system("mount", "\(kind.rawValue) source \(source)")
            }
            return .tree(fd: fd, path: source)
        case .dev, .filesystem("tmpfs", _, "/dev", _):
            let fds = UnsafeMutablePointer<Int32>.allocate(capacity: Self.deviceNodes.count)
            fds.initialize(repeating: -1, count: Self.deviceNodes.count)
            for (index, node) in Self.deviceNodes.enumerated() {
                fds[index] = appd_open_tree_clone("/dev/" + node, 0)
                guard fds[index] >= 0 else {
                    let failure = LaunchFailure.system("mount", "dev: bind /dev/\(node)")
                    var source = Source.devices(fds)
                    Self.close(&source)
                    throw failure
                }
            }
            return .devices(fds)
        default:
            return .none
        }
    }

    /// Closes the clones and frees the device lists; every entry becomes `.none`.
    private static func close(_ sources: UnsafeMutablePointer<Source>, _ count: Int) {
        for index in 0..<count { close(&sources[index]) }
    }

    private static func close(_ source: inout Source) {
        switch source {
        case .tree(let fd, _): _ = Glibc.close(fd)
        case .devices(let fds):
            for index in 0..<deviceNodes.count where fds[index] >= 0 { _ = Glibc.close(fds[index]) }
            fds.deallocate()
        default: break
        }
        source = .none
    }

    /// The host path a bind record reads from, resolved (fallback layout).
    private func resolveSource(_ record: MountRecord) throws -> Source {
        guard case .bind(let kind, let source, _) = record else { return .none }
        guard let resolved = realpath(source, nil) else {
            if errno == ENOENT && kind == .readOnlyTry { return .missing }
            throw LaunchFailure.system("mount", "\(kind.rawValue) source \(source)")
        }
        defer { free(resolved) }
        return .path(String(cString: resolved))
    }

    /// Applies one record below `root` ("" once the new root is `/`, `/newroot` in the fallback
    /// layout).
    private func apply(_ record: MountRecord, source: Source, root: String) throws {
        switch record {
        case .bind(let kind, _, let destination):
            switch source {
            case .tree(let fd, let path):
                try bind(kind, tree: fd, source: path, to: destination, root: root)
            case .path(let path):
                try bind(kind, from: Self.oldRoot + path, to: destination, root: root)
            default:
                return  // ro-bind-try of a missing source
            }
        case .tmpfs(let destination, let mode):
            let target = try makeDirectory(destination, root: root)
            try mountTmpfs(target, mode: mode, step: "mount")
        case .proc(let destination):
            let target = try makeDirectory(destination, root: root)
            if phase == .whole { try mountProc(target, destination) }
        case .dev(let destination):
            var nodes: UnsafeMutablePointer<Int32>?
            if case .devices(let fds) = source { nodes = fds }
            let dev = try makeDevTree(destination, root: root, nodes: nodes)
            if phase == .whole { try mountDevInstanceParts(dev) }
        case .symlink(let target, let destination):
            let path = root + destination
            try FileIO.makeDirectories(FileIO.parent(of: path), mode: 0o755, step: "mount")
            try sys(symlink(target, path), "mount", "symlink \(destination) -> \(target)")
        case .directory(let destination, let mode):
            let path = try makeDirectory(destination, root: root)
            try sys(chmod(path, mode), "mount", "chmod \(destination)")
        case .filesystem(let type, let fsSource, let destination, let options):
            let target = try makeDirectory(destination, root: root)
            try mountFilesystem(type, source: fsSource, on: target, options: options, destination)
            if type == "tmpfs" && destination == "/dev" {
                var nodes: UnsafeMutablePointer<Int32>?
                if case .devices(let fds) = source { nodes = fds }
                try addDeviceNodes(target, nodes: nodes, root: root, ptmx: true)
            }
        case .mask, .readOnlyPath:
            return  // restrictPaths, later
        case .file(let destination, let mode, let content):
            let path = root + destination
            try FileIO.makeDirectories(FileIO.parent(of: path), mode: 0o755, step: "mount")
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
            try sys(fd, "mount", "cannot create file \(destination)")
            defer { Glibc.close(fd) }
            guard FileIO.writeAll(fd, content) else {
                throw LaunchFailure.system("mount", "cannot write file \(destination)")
            }
            try sys(fchmod(fd, mode), "mount", "chmod \(destination)")
        case .node(let destination, let kind, let mode, let device, let uid, let gid):
            try makeNode(
                destination, kind: kind, mode: mode, device: device, uid: uid, gid: gid, root: root)
        }
    }

    /// `mount node`: only where the mount is nodev, so that what the config names can never be
    /// opened as a device (a fifo is an ordinary file's peer). Made as the host's root (CAP_MKNOD),
    /// then given to `uid`:`gid` and `mode` (mknod's mode is cut by the umask).
    private func makeNode(
        _ destination: String, kind: mode_t, mode: mode_t, device: dev_t, uid: UInt32, gid: UInt32,
        root: String
    ) throws {
        let path = root + destination
        let parent = FileIO.parent(of: path)
        try FileIO.makeDirectories(parent, mode: 0o755, step: "mount")
        var info = statvfs()
        try sys(statvfs(parent, &info), "mount", "statvfs \(FileIO.parent(of: destination))")
        guard info.f_flag & 4 != 0 else {  // ST_NODEV
            throw LaunchFailure(
                "mount", "node \(destination): its folder is not on a nodev mount")
        }
        try sys(mknod(path, kind | mode, device), "mount", "mknod \(destination)")
        try sys(lchown(path, uid, gid), "mount", "chown \(destination)")
        try sys(chmod(path, mode), "mount", "chmod \(destination)")
    }

    /// A cloned source moved onto its mount point, then the flags as `restrict` sets them. The
    /// mount point is a directory or an empty file, like the source.
    private func bind(
        _ kind: BindKind, tree: Int32, source: String, to destination: String, root: String
    ) throws {
        var status = stat()
        try sys(fstat(tree, &status), "mount", "\(kind.rawValue) source \(source)")
        let target = try mountPoint(
            destination, root: root, directory: status.st_mode & S_IFMT == S_IFDIR)
        let what = "\(kind.rawValue) \(source) on \(destination)"
        try sys(appd_move_mount_onto(tree, target), "mount", what)
        switch kind {
        case .readOnly, .readOnlyTry:
            try restrict(target, locked: { appd_locked_mount_flags_fd(tree) }, readOnly: true, what)
        case .readWrite:
            try restrict(
                target, locked: { appd_locked_mount_flags_fd(tree) }, readOnly: false, what)
        case .readWriteExec:
            try restrict(
                target, locked: { appd_locked_mount_flags_fd(tree) }, readOnly: false,
                executable: true, what)
        case .device: break
        }
    }

    private func mountPoint(_ destination: String, root: String, directory: Bool) throws -> String {
        if directory { return try makeDirectory(destination, root: root) }
        let target = root + destination
        try FileIO.makeDirectories(FileIO.parent(of: target), mode: 0o755, step: "mount")
        try FileIO.touch(target, mode: 0o644, step: "mount")
        return target
    }

    /// A recursive bind from a host path (fallback layout), then the flags as `restrict` sets
    /// them. The mount point is a directory or an empty file, like the source.
    private func bind(
        _ kind: BindKind, from source: String, to destination: String, root: String
    ) throws {
        var status = stat()
        try sys(stat(source, &status), "mount", "\(kind.rawValue) source \(source)")
        let target = try mountPoint(
            destination, root: root, directory: status.st_mode & S_IFMT == S_IFDIR)
        let what = "\(kind.rawValue) \(source.dropFirst(Self.oldRoot.count)) on \(destination)"
        try sys(mount(source, target, nil, UInt(MS_BIND | MS_REC), nil), "mount", what)
        switch kind {
        case .readOnly, .readOnlyTry:
            try restrict(target, locked: { appd_locked_mount_flags(source) }, readOnly: true, what)
        case .readWrite:
            try restrict(target, locked: { appd_locked_mount_flags(source) }, readOnly: false, what)
        case .readWriteExec:
            try restrict(
                target, locked: { appd_locked_mount_flags(source) }, readOnly: false,
                executable: true, what)
        case .device: break
        }
    }

    /// Adds nosuid,nodev to the bind at `target` and every mount below it, and read-only to a
    /// ro-bind, noexec to a rw-bind (never either for dev-bind, nor noexec for a plain
    /// container's rw-bind-exec volume, as runc mounts it): only signed code runs, so what
    /// an app can write (its data and group containers, its tmp, an exception path) it can
    /// neither exec nor map executable (mmap(PROT_EXEC) of such a file fails with EPERM). mount_setattr(AT_RECURSIVE) covers submounts, which a remount does not,
    /// and only ever sets flags, so flags the kernel locked on the source (noexec on a
    /// user-namespace mount) are kept by construction. Kernels before 5.12 get the classic
    /// remount of the top mount, retried with the source's own flags (`locked`) when the
    /// kernel refuses to drop a locked one.
    private func restrict(
        _ target: String, locked: () -> Int, readOnly: Bool, executable: Bool = false,
        _ what: String
    ) throws {
        let attributes =
            APPD_MOUNT_ATTR_NOSUID | APPD_MOUNT_ATTR_NODEV
            | (readOnly ? APPD_MOUNT_ATTR_RDONLY : executable ? 0 : APPD_MOUNT_ATTR_NOEXEC)
        if appd_mount_setattr_recursive(target, attributes) == 0 { return }
        guard errno == ENOSYS else {
            throw LaunchFailure.system("mount", "\(what): mount_setattr")
        }
        var flags = UInt(MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV)
        flags |= readOnly ? UInt(MS_RDONLY) : executable ? 0 : UInt(MS_NOEXEC)
        if mount(nil, target, nil, flags, nil) == 0 { return }
        guard errno == EPERM else { throw LaunchFailure.system("mount", "\(what): remount") }
        let lockedFlags = locked()
        try sys(lockedFlags, "mount", "\(what): statvfs of the source")
        try sys(
            mount(nil, target, nil, flags | UInt(lockedFlags), nil), "mount", "\(what): remount")
    }

    /// The per-instance part of a joined template, on the launch's private copy of it (the
    /// root is the app's already): procfs for this pid namespace, /dev/shm, devpts. Creates
    /// nothing: the template holds every mount point.
    func mountInstanceParts() throws {
        for record in profile.mounts {
            switch record {
            case .proc(let destination): try mountProc(destination, destination)
            case .dev(let destination): try mountDevInstanceParts(destination)
            default: continue
            }
        }
    }

    /// Makes the template's own tmpfs mounts (the root, `tmpfs` records, /dev) read-only:
    /// every instance's copy shares their contents. Binds keep the flags their records gave.
    func seal() throws {
        try remountReadOnly("/")
        for record in profile.mounts {
            switch record {
            case .tmpfs(let destination, _), .dev(let destination): try remountReadOnly(destination)
            default: continue
            }
        }
    }

    private func remountReadOnly(_ path: String) throws {
        let flags = UInt(MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        try sys(mount(nil, path, nil, flags, nil), "mount", "cannot make \(path) read-only")
    }

    private func mountProc(_ target: String, _ destination: String) throws {
        try sys(
            mount("proc", target, "proc", UInt(MS_NOSUID | MS_NODEV | MS_NOEXEC), nil),
            "mount", "proc on \(destination)")
    }

    /// /dev's own mounts: a shm tmpfs (noexec, as every place the app can write) and, with
    /// `console`, a private devpts instance.
    private func mountDevInstanceParts(_ dev: String) throws {
        try mountTmpfs(dev + "/shm", mode: 0o1777, step: "mount", noexec: true)
        if profile.console {
            try sys(
                mount(
                    "devpts", dev + "/pts", "devpts", UInt(MS_NOSUID | MS_NOEXEC),
                    "newinstance,ptmxmode=0666,mode=620"), "mount", "dev: devpts")
        }
    }

    /// Minimal /dev: the harmless nodes from the host (the clones in `nodes`, or bound from
    /// `/oldroot/dev` in the fallback layout), the /proc/self/fd links, and the mount points
    /// of `mountDevInstanceParts` (with `console`, /dev/ptmx too). Returns its path.
    private func makeDevTree(
        _ destination: String, root: String, nodes: UnsafeMutablePointer<Int32>?
    ) throws -> String {
        let dev = try makeDirectory(destination, root: root)
        try mountTmpfs(dev, mode: 0o755, step: "mount")
        try addDeviceNodes(dev, nodes: nodes, root: root, ptmx: profile.console)
        try sys(mkdir(dev + "/shm", 0o755), "mount", "dev: mkdir shm")
        if profile.console { try sys(mkdir(dev + "/pts", 0o755), "mount", "dev: mkdir pts") }
        return dev
    }

    /// The harmless device nodes from the host in the tmpfs at `dev` (the clones in `nodes`,
    /// or bound from `/oldroot/dev` in the fallback layout) and the runtime spec's default links
    /// (`fd`, `stdin`, `stdout`, `stderr`; `ptmx` → `pts/ptmx` with `ptmx`).
    private func addDeviceNodes(
        _ dev: String, nodes: UnsafeMutablePointer<Int32>?, root: String, ptmx: Bool
    ) throws {
        for (index, node) in Self.deviceNodes.enumerated() {
            let target = dev + "/" + node
            try FileIO.touch(target, mode: 0o666, step: "mount")
            if let nodes {
                try sys(
                    appd_move_mount_onto(nodes[index], target), "mount", "dev: bind /dev/\(node)")
            } else {
                try sys(
                    mount(Self.oldRoot + "/dev/" + node, target, nil, UInt(MS_BIND), nil), "mount",
                    "dev: bind /dev/\(node)")
            }
        }
        try sys(symlink("/proc/self/fd", dev + "/fd"), "mount", "dev: symlink fd")
        try sys(symlink("/proc/self/fd/0", dev + "/stdin"), "mount", "dev: symlink stdin")
        try sys(symlink("/proc/self/fd/1", dev + "/stdout"), "mount", "dev: symlink stdout")
        try sys(symlink("/proc/self/fd/2", dev + "/stderr"), "mount", "dev: symlink stderr")
        if ptmx { try sys(symlink("pts/ptmx", dev + "/ptmx"), "mount", "dev: symlink ptmx") }
    }

    /// A kernel filesystem with an OCI config's options: the flags it names (`ro`, `noexec`,
    /// atime ones), always `nosuid` and `nodev`, the rest passed as data.
    private func mountFilesystem(
        _ type: String, source: String, on target: String, options: String, _ destination: String
    ) throws {
        var flags = UInt(MS_NOSUID | MS_NODEV)
        var data = ""
        for option in options.split(separator: ",") {
            switch option {
            case "ro": flags |= UInt(MS_RDONLY)
            case "noexec": flags |= UInt(MS_NOEXEC)
            case "sync": flags |= UInt(MS_SYNCHRONOUS)
            case "noatime": flags |= UInt(MS_NOATIME)
            case "nodiratime": flags |= UInt(MS_NODIRATIME)
            case "relatime": flags |= UInt(MS_RELATIME)
            case "strictatime": flags |= UInt(MS_STRICTATIME)
            case "rw", "nosuid", "nodev", "suid", "dev", "exec", "private", "rprivate", "slave",
                "rslave", "shared", "rshared", "bind", "rbind":
                continue
            default:
                data += (data.isEmpty ? "" : ",") + option
            }
        }
        try sys(
            mount(source.isEmpty ? type : source, target, type, flags, data.isEmpty ? nil : data),
            "mount", "\(type) on \(destination)")
    }

    /// A masked path: /dev/null bound on a file, an empty read-only tmpfs on a folder; a path
    /// that does not exist is left alone (the runtime spec's rule).
    private func mask(_ path: String, _ destination: String, root: String) throws {
        var status = stat()
        guard lstat(path, &status) == 0 else {
            if errno == ENOENT { return }
            throw LaunchFailure.system("mount", "mask \(destination)")
        }
        if status.st_mode & S_IFMT == S_IFDIR {
            try sys(
                mount(
                    "tmpfs", path, "tmpfs", UInt(MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC),
                    "size=0,mode=0555"), "mount", "mask \(destination)")
        } else {
            try sys(
                mount(root + "/dev/null", path, nil, UInt(MS_BIND), nil), "mount",
                "mask \(destination) (with /dev/null)")
        }
    }

    /// A readonly path: bound onto itself and made read-only with what is below it.
    private func makeReadOnly(_ path: String, _ destination: String) throws {
        var status = stat()
        guard lstat(path, &status) == 0 else {
            if errno == ENOENT { return }
            throw LaunchFailure.system("mount", "read-only \(destination)")
        }
        try sys(
            mount(path, path, nil, UInt(MS_BIND | MS_REC), nil), "mount",
            "read-only \(destination)")
        try restrict(path, locked: { appd_locked_mount_flags(path) }, readOnly: true, destination)
    }

    private func makeDirectory(_ destination: String, root: String) throws -> String {
        let path = root + destination
        try FileIO.makeDirectories(path, mode: 0o755, step: "mount")
        return path
    }

    private func mountTmpfs(_ path: String, mode: mode_t, step: String, noexec: Bool = false) throws
    {
        let options = "mode=0" + FileIO.octal(mode)
        let flags = UInt(MS_NOSUID | MS_NODEV) | (noexec ? UInt(MS_NOEXEC) : 0)
        try sys(
            mount("tmpfs", path, "tmpfs", flags, options), step,
            "tmpfs on \(path)")
    }
}
