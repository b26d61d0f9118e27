import CLinux
import Glibc

/// An owned, close-on-exec file descriptor, closed when the value goes away.
///
/// Everything the installer does inside the state root goes through directory fds
/// (`openat`, `mkdirat`, `renameat`, `unlinkat`), never through paths that could be
/// redirected by a symlink someone slipped in.
public final class FileDescriptor {
    public let raw: Int32
    /// For messages only.
    public let path: String

    public init(raw: Int32, path: String) {
        self.raw = raw
        self.path = path
    }

    deinit { close(raw) }

    /// Opens an existing directory without following a final symlink.
    public static func directory(_ path: String) throws -> FileDescriptor {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw AppdError.system("open \(path)") }
        return FileDescriptor(raw: fd, path: path)
    }

    public func openDirectory(_ name: String) throws -> FileDescriptor {
        let fd = openat(raw, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw AppdError.system("open \(child(name))") }
        return FileDescriptor(raw: fd, path: child(name))
    }

    /// Creates a directory and opens it. Fails if something already has that name.
    public func makeDirectory(_ name: String, mode: mode_t = 0o700) throws -> FileDescriptor {
        guard mkdirat(raw, name, mode) == 0 else { throw AppdError.system("mkdir \(child(name))") }
        return try openDirectory(name)
    }

    public func child(_ name: String) -> String { path == "/" ? "/\(name)" : "\(path)/\(name)" }

    public func exists(_ name: String) -> Bool {
        var st = stat()
        return fstatat(raw, name, &st, AT_SYMLINK_NOFOLLOW) == 0
    }

    public func status() throws -> Glibc.stat {
        var st = Glibc.stat()
        guard fstat(raw, &st) == 0 else { throw AppdError.system("stat \(path)") }
        return st
    }

    public func chown(uid: uid_t, gid: gid_t) throws {
        guard fchown(raw, uid, gid) == 0 else { throw AppdError.system("chown \(path)") }
    }

    public func chmod(_ mode: mode_t) throws {
        guard fchmod(raw, mode) == 0 else { throw AppdError.system("chmod \(path)") }
    }

    public func sync() throws {
        guard fsync(raw) == 0 else { throw AppdError.system("fsync \(path)") }
    }

    /// Flushes the whole filesystem: one call makes thousands of staged files durable.
    public func syncFilesystem() throws {
        guard appd_syncfs(raw) == 0 else { throw AppdError.system("syncfs \(path)") }
    }

    /// Moves `name` to `target/newName`, refusing to replace anything already there.
    public func rename(_ name: String, to target: FileDescriptor, as newName: String) throws {
        guard appd_rename_noreplace(raw, name, target.raw, newName) == 0 else {
            throw AppdError.system("rename \(child(name)) to \(target.child(newName))")
        }
    }

    /// Names in this directory, without `.` and `..`, sorted.
    public func entries() throws -> [String] {
        var names: [String] = []
        try forEachEntry { name in
            names.append(name)
            return true
        }
        return names.sorted()
    }

    /// Whether the directory lists anything besides `.` and `..`, reading no further than the
    /// first such entry.
    public func hasEntries() throws -> Bool {
        var found = false
        try forEachEntry { _ in
            found = true
            return false
        }
        return found
    }

    /// Calls `body` with each name but `.` and `..` until it returns false.
    private func forEachEntry(_ body: (String) -> Bool) throws {
        // fdopendir takes ownership of the fd it is given, so hand it a duplicate.
        let dup = fcntl(raw, F_DUPFD_CLOEXEC, 0)
        guard dup >= 0, let dir = fdopendir(dup) else {
            if dup >= 0 { close(dup) }
            throw AppdError.system("opendir \(path)")
        }
        defer { closedir(dir) }
        rewinddir(dir)
        while let entry = readdir(dir) {
            let name = directoryEntryString(entry)
            if name != "." && name != ".." && !body(name) { return }
        }
    }
}
