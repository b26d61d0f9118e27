import AppBundle
import AppdBase
import CLinux
import Glibc

/// Removing a tree an app controls (its data container, a group container, whatever recovery
/// finds in staging): any depth, any number of entries, FIFOs, sockets, symlinks, files and
/// directories the app made mode 000. The walk is iterative (fts-style): one directory is open
/// at a time, besides this one and a short-lived dup while a directory is listed, so at most
/// three fds whatever the depth, and no stack frames per level. Going up uses `..` and checks it
/// is the directory we came from (device and inode), so a tree moved meanwhile stops the walk
/// rather than steer it elsewhere; a symlink is never followed, and a mount point inside the
/// tree is refused rather than crossed.
extension FileDescriptor {
    /// One directory on the way down: its name in its parent, its identity, and the
    /// subdirectories still to remove.
    private struct Level {
        var name: String
        var device: UInt64
        var inode: UInt64
        var pending: [String]
        var rescans = 0
    }

    /// Removes `name` and everything below it. `onDirectory` runs each time the walk enters a
    /// directory (the tests count open fds there).
    public func removeTree(_ name: String, onDirectory: (() -> Void)? = nil) throws {
        var info = Glibc.stat()
        guard fstatat(raw, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
            if errno == ENOENT { return }
            throw AppdError.system("stat \(child(name))")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            guard unlinkat(raw, name, 0) == 0 || errno == ENOENT else {
                throw AppdError.system("unlink \(child(name))")
            }
            return
        }
        var levels: [Level] = []
        var current: Int32 = -1
        defer { if current >= 0 { close(current) } }
        // The path of `last` in the directory being walked, for messages (levels[0] is `name`).
        func shownPath(_ last: String? = nil) -> String {
            guard !levels.isEmpty else { return child(name) }
            return Self.describe(
                child(name), levels.dropFirst().map(\.name) + (last.map { [$0] } ?? []))
        }
        func descend(from parent: Int32, _ entry: String, rescans: Int = 0) throws -> Bool {
            let fd = try Self.openForRemoval(parent, entry, path: { shownPath(entry) })
            guard fd >= 0 else { return false }
            var st = Glibc.stat()
            guard fstat(fd, &st) == 0 else {
                close(fd)
                throw AppdError.system("stat \(shownPath(entry))")
            }
            let pending: [String]
            do {
                pending = try Self.emptyOfFiles(fd, path: { shownPath(entry) })
            } catch {
                close(fd)
                throw error
            }
            if current >= 0 { close(current) }
            current = fd
            levels.append(
                Level(
                    name: entry, device: UInt64(st.st_dev), inode: UInt64(st.st_ino),
                    pending: pending, rescans: rescans))
            onDirectory?()
            return true
        }
        guard try descend(from: raw, name) else { return }
        while let top = levels.last {
            if let next = levels[levels.count - 1].pending.popLast() {
                _ = try descend(from: current, next)
                continue
            }
            levels.removeLast()
            let parent: Int32
            if let above = levels.last {
                parent = openat(current, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                guard parent >= 0 else { throw AppdError.system("open \(shownPath())") }
                var st = Glibc.stat()
                guard fstat(parent, &st) == 0, UInt64(st.st_dev) == above.device,
                    UInt64(st.st_ino) == above.inode
                else {
                    close(parent)
                    throw AppdError(.io, "\(shownPath()) moved while it was being removed; stopped")
                }
            } else {
                parent = raw
            }
            close(current)
            current = parent == raw ? -1 : parent
            if unlinkat(parent, top.name, AT_REMOVEDIR) == 0 || errno == ENOENT { continue }
            // Something appeared in it since it was listed (or a listing missed an entry):
            // list it again, a bounded number of times.
            if errno == ENOTEMPTY && top.rescans < 3 {
                // Gone meanwhile (false): then it is removed, which is all we wanted.
                _ = try descend(from: parent, top.name, rescans: top.rescans + 1)
                continue
            }
            throw AppdError.system("rmdir \(shownPath(top.name))")
        }
    }

    /// O_PATH (behind _GNU_SOURCE, so not in Swift's Glibc): the same value on every Linux ABI
    /// but alpha, parisc and sparc.
    private static let pathOnly: Int32 = 0o10_000_000

    /// Opens `name` in `parent` as a directory to empty; -1 if it is gone; a non-directory
    /// found there instead is unlinked (and -1). A directory without rights for its owner
    /// (an app's chmod 000) is given 0700 first, without following anything.
    private static func openForRemoval(_ parent: Int32, _ name: String, path: () -> String) throws
        -> Int32
    {
        var fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 && errno == EACCES {
            // Without CAP_DAC_OVERRIDE: an O_PATH fd needs no rights, and chmod through
            // /proc/self/fd changes exactly that directory.
            let handle = openat(parent, name, Self.pathOnly | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if handle >= 0 {
                _ = Glibc.chmod("/proc/self/fd/\(handle)", 0o700)
                close(handle)
            }
            fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        }
        if fd < 0 {
            switch errno {
            case ENOENT: return -1
            case ENOTDIR, ELOOP:
                guard unlinkat(parent, name, 0) == 0 || errno == ENOENT else {
                    throw AppdError.system("unlink \(path())")
                }
                return -1
            default: throw AppdError.system("open \(path())")
            }
        }
        if appd_is_mount_root(fd) == 1 {
            close(fd)
            throw AppdError(
                .io,
                "\(path()) is a mount point: appd does not remove what is mounted inside a container",
                hint: "unmount it, then run 'appd doctor --repair'")
        }
        var st = Glibc.stat()
        if fstat(fd, &st) == 0, st.st_mode & 0o700 != 0o700 { _ = fchmod(fd, 0o700) }
        return fd
    }

    /// Lists the directory, unlinks everything in it that is not a directory, and returns the
    /// names of its subdirectories. The names are read first and removed after the listing
    /// is closed: unlinking while readdir runs may make it skip entries.
    private static func emptyOfFiles(_ fd: Int32, path: () -> String) throws -> [String] {
        let copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        guard copy >= 0 else { throw AppdError.system("open \(path())") }
        guard let dir = fdopendir(copy) else {
            close(copy)
            throw AppdError.system("opendir \(path())")
        }
        var directories: [String] = []
        var others: [String] = []
        errno = 0
        while let entry = readdir(dir) {
            let name = directoryEntryString(entry)
            if name == "." || name == ".." { continue }
            switch Int32(entry.pointee.d_type) {
            case Int32(DT_DIR): directories.append(name)
            case Int32(DT_UNKNOWN):
                var st = Glibc.stat()
                if fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0, st.st_mode & S_IFMT == S_IFDIR
                {
                    directories.append(name)
                } else {
                    others.append(name)
                }
            default: others.append(name)
            }
        }
        let failed = errno
        closedir(dir)
        if failed != 0 { throw AppdError.system("readdir \(path())", errno: failed) }
        for name in others where unlinkat(fd, name, 0) != 0 {
            switch errno {
            case ENOENT: continue
            case EISDIR: directories.append(name)  // replaced by a directory since the listing
            default: throw AppdError.system("unlink \(path())/\(name)")
            }
        }
        return directories
    }

    /// `/root/staging/trash-X/a/b/c`, shortened in the middle past a few levels.
    private static func describe(_ top: String, _ names: [String]) -> String {
        guard names.count > 6 else { return ([top] + names).joined(separator: "/") }
        return ([top] + names.prefix(3) + ["…(\(names.count - 5) more levels)…"] + names.suffix(2))
            .joined(separator: "/")
    }
}
