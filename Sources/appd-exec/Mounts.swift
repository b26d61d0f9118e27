import CLinux
import Glibc

/// Builds the new root in PID 1, inside the mount namespace the launcher unshared (the profile
/// is refused earlier if it mounts without `unshare mount`, so nothing here can touch the
/// caller's mounts).
///
/// Layout, as in bubblewrap: a scratch tmpfs over `/tmp` becomes the root for a moment, the host
/// root hangs below it at `/oldroot` and the new root is built at `/newroot`. Bind sources are
/// therefore read under `/oldroot`, where nothing hides them (not even the scratch tmpfs: the
/// host's `/tmp` is visible again at `/oldroot/tmp`). Then the host root is detached and
/// `/newroot` becomes `/`.
struct Mounts {
    let profile: Profile

    private static let scratch = "/tmp"
    private static let oldRoot = "/oldroot"
    private static let newRoot = "/newroot"
    private static let deviceNodes = ["null", "zero", "full", "random", "urandom", "tty"]

    func build() throws {
        // Resolve the bind sources on the host first: an absolute symlink in a source must
        // resolve against the host root, not against the scratch root.
        let sources = try profile.mounts.map(resolveSource)

        try sys(
            mount(nil, "/", nil, UInt(MS_REC | MS_PRIVATE), nil), "mount",
            "cannot make / rprivate")
        try mountTmpfs(Self.scratch, mode: 0o755, step: "root")
        try sys(mkdir(Self.scratch + Self.oldRoot, 0o755), "root", "cannot create oldroot")
        try sys(mkdir(Self.scratch + Self.newRoot, 0o755), "root", "cannot create newroot")
        try mountTmpfs(Self.scratch + Self.newRoot, mode: 0o755, step: "root")
        try sys(
            appd_pivot_root(Self.scratch, Self.scratch + Self.oldRoot), "pivot_root",
            "cannot pivot into the scratch root")
        try sys(chdir("/"), "pivot_root", "chdir /")

        for (record, source) in zip(profile.mounts, sources) {
            try apply(record, source: source)
        }

        // The mounts that needed the host (binds, proc) are done; nothing of the host may stay
        // reachable.
        try sys(
            umount2(Self.oldRoot, Int32(MNT_DETACH)), "pivot_root", "cannot detach the old root")
        try sys(chdir(Self.newRoot), "pivot_root", "chdir \(Self.newRoot)")
        // pivot_root(".", ".") stacks the scratch root on top of the new one; detaching "."
        // then removes it (pivot_root(2), "NOTES").
        try sys(appd_pivot_root(".", "."), "pivot_root", "cannot pivot into the new root")
        try sys(umount2(".", Int32(MNT_DETACH)), "pivot_root", "cannot detach the scratch root")
        try sys(chdir("/"), "pivot_root", "chdir /")
    }

    /// The host path a bind record reads from, resolved; nil for a missing `ro-bind-try`.
    private func resolveSource(_ record: MountRecord) throws -> String? {
        guard case .bind(let kind, let source, _) = record else { return nil }
        guard let resolved = realpath(source, nil) else {
            if errno == ENOENT && kind == .readOnlyTry { return nil }
            throw LaunchFailure.system("mount", "\(kind.rawValue) source \(source)")
        }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private func apply(_ record: MountRecord, source: String?) throws {
        switch record {
        case .bind(let kind, _, let destination):
            guard let source else { return }  // ro-bind-try of a missing source
            try bind(kind, from: Self.oldRoot + source, to: destination)
        case .tmpfs(let destination, let mode):
            let target = try makeDirectory(destination)
            try mountTmpfs(target, mode: mode, step: "mount")
        case .proc(let destination):
            let target = try makeDirectory(destination)
            try sys(
                mount("proc", target, "proc", UInt(MS_NOSUID | MS_NODEV | MS_NOEXEC), nil),
                "mount", "proc on \(destination)")
        case .dev(let destination):
            try makeDev(destination)
        case .symlink(let target, let destination):
            let path = Self.newRoot + destination
            try FileIO.makeDirectories(FileIO.parent(of: path), mode: 0o755, step: "mount")
            try sys(symlink(target, path), "mount", "symlink \(destination) -> \(target)")
        case .directory(let destination, let mode):
            let path = try makeDirectory(destination)
            try sys(chmod(path, mode), "mount", "chmod \(destination)")
        case .file(let destination, let mode, let content):
            let path = Self.newRoot + destination
            try FileIO.makeDirectories(FileIO.parent(of: path), mode: 0o755, step: "mount")
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
            try sys(fd, "mount", "cannot create file \(destination)")
            defer { close(fd) }
            guard FileIO.writeAll(fd, content) else {
                throw LaunchFailure.system("mount", "cannot write file \(destination)")
            }
            try sys(fchmod(fd, mode), "mount", "chmod \(destination)")
        }
    }

    /// A recursive bind, then the flags: read-only for ro-bind, nosuid,nodev except for
    /// dev-bind. The mount point is a directory or an empty file, like the source.
    private func bind(_ kind: BindKind, from source: String, to destination: String) throws {
        var status = stat()
        try sys(stat(source, &status), "mount", "\(kind.rawValue) source \(source)")
        let target: String
        if status.st_mode & S_IFMT == S_IFDIR {
            target = try makeDirectory(destination)
        } else {
            target = Self.newRoot + destination
            try FileIO.makeDirectories(FileIO.parent(of: target), mode: 0o755, step: "mount")
            try FileIO.touch(target, mode: 0o644, step: "mount")
        }
        let what = "\(kind.rawValue) \(source.dropFirst(Self.oldRoot.count)) on \(destination)"
        try sys(mount(source, target, nil, UInt(MS_BIND | MS_REC), nil), "mount", what)
        switch kind {
        case .readOnly, .readOnlyTry: try restrict(target, source: source, readOnly: true, what)
        case .readWrite: try restrict(target, source: source, readOnly: false, what)
        case .device: break
        }
    }

    /// Adds nosuid,nodev (and read-only) to the bind at `target` and every mount below it.
    /// mount_setattr(AT_RECURSIVE) covers submounts, which a remount does not, and only ever
    /// sets flags, so flags the kernel locked on the source (noexec on a user-namespace mount)
    /// are kept by construction. Kernels before 5.12 get the classic remount of the top mount,
    /// retried with the source's own flags when the kernel refuses to drop a locked one.
    private func restrict(
        _ target: String, source: String, readOnly: Bool, _ what: String
    ) throws {
        let attributes =
            APPD_MOUNT_ATTR_NOSUID | APPD_MOUNT_ATTR_NODEV | (readOnly ? APPD_MOUNT_ATTR_RDONLY : 0)
        if appd_mount_setattr_recursive(target, attributes) == 0 { return }
        guard errno == ENOSYS else {
            throw LaunchFailure.system("mount", "\(what): mount_setattr")
        }
        var flags = UInt(MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV)
        if readOnly { flags |= UInt(MS_RDONLY) }
        if mount(nil, target, nil, flags, nil) == 0 { return }
        guard errno == EPERM else { throw LaunchFailure.system("mount", "\(what): remount") }
        let locked = appd_locked_mount_flags(source)
        try sys(locked, "mount", "\(what): statvfs of the source")
        try sys(mount(nil, target, nil, flags | UInt(locked), nil), "mount", "\(what): remount")
    }

    /// Minimal /dev: the harmless nodes bound from the host, the /proc/self/fd links, a shm
    /// tmpfs, and with `console` a private devpts instance.
    private func makeDev(_ destination: String) throws {
        let dev = try makeDirectory(destination)
        try mountTmpfs(dev, mode: 0o755, step: "mount")
        for node in Self.deviceNodes {
            let target = "\(dev)/\(node)"
            try FileIO.touch(target, mode: 0o666, step: "mount")
            try sys(
                mount("\(Self.oldRoot)/dev/\(node)", target, nil, UInt(MS_BIND), nil), "mount",
                "dev: bind /dev/\(node)")
        }
        let links = [
            ("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
            ("stderr", "/proc/self/fd/2"),
        ]
        for (name, target) in links {
            try sys(symlink(target, "\(dev)/\(name)"), "mount", "dev: symlink \(name)")
        }
        try sys(mkdir("\(dev)/shm", 0o755), "mount", "dev: mkdir shm")
        try mountTmpfs("\(dev)/shm", mode: 0o1777, step: "mount")
        if profile.console {
            try sys(mkdir("\(dev)/pts", 0o755), "mount", "dev: mkdir pts")
            try sys(
                mount(
                    "devpts", "\(dev)/pts", "devpts", UInt(MS_NOSUID | MS_NOEXEC),
                    "newinstance,ptmxmode=0666,mode=620"), "mount", "dev: devpts")
            try sys(symlink("pts/ptmx", "\(dev)/ptmx"), "mount", "dev: symlink ptmx")
        }
    }

    private func makeDirectory(_ destination: String) throws -> String {
        let path = Self.newRoot + destination
        try FileIO.makeDirectories(path, mode: 0o755, step: "mount")
        return path
    }

    private func mountTmpfs(_ path: String, mode: mode_t, step: String) throws {
        let options = "mode=0" + String(mode, radix: 8)
        try sys(
            mount("tmpfs", path, "tmpfs", UInt(MS_NOSUID | MS_NODEV), options), step,
            "tmpfs on \(path)")
    }
}
