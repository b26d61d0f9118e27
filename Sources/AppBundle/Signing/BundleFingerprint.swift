import Crypto
import Foundation
import Glibc

/// What the file system says about every entry of an installed bundle, hashed: its path, inode,
/// type and mode, owner, link count, size, and modification and change times in nanoseconds.
/// No file is read. Any change to the tree — a write, a chmod or chown, a rename, a file added,
/// removed or replaced — moves a change time (`st_ctime`, which no system call sets to a chosen
/// value) or an inode, so the fingerprint differs; taking it costs a walk (a few system calls
/// per entry), not a hash of every byte.
///
/// The launch-time bundle check (AppStore+Integrity.swift) hashes the tree once and then
/// trusts the read-only container while its fingerprint stays the one taken before that hash.
public enum BundleFingerprint {
    /// The fingerprint of the tree at `path`, walked as `BundleWalker` walks it (never
    /// following a symlink, within `limits`); nil when the walk found problems (the full
    /// check then runs and names them).
    public static func read(bundleAt path: String, limits: BundleLimits) throws -> [UInt8]? {
        var visitor = Visitor()
        let tree = try BundleWalker.walk(path, limits: limits, visitor: &visitor)
        guard tree.problems.isEmpty, !visitor.failed else { return nil }
        return Array(visitor.hasher.finalize())
    }

    private struct Visitor: BundleVisitor {
        var hasher = SHA256()
        /// An fstat failed: no fingerprint (the caller hashes instead).
        var failed = false

        mutating func enterDirectory(_ entry: BundleEntry, fd: Int32) throws {
            add(entry.relativePath, "d", fd)
        }
        mutating func leaveDirectory(_ entry: BundleEntry, fd: Int32) throws {}
        mutating func visitFile(_ entry: BundleEntry, fd: Int32) throws {
            add(entry.relativePath, "f", fd)
        }

        mutating func visitSymlink(_ entry: BundleEntry) throws {
            // A symlink is changed only by replacing it, which changes its directory's times.
            guard case .symlink(let target) = entry.kind else { return }
            hasher.update(data: Array("l \(entry.relativePath)\0\(target)\0".utf8))
        }

        private mutating func add(_ path: String, _ kind: String, _ fd: Int32) {
            var info = stat()
            guard fd >= 0, fstat(fd, &info) == 0 else {
                failed = true
                return
            }
            hasher.update(data: Array("\(kind) \(path)\0".utf8))
            func field(_ value: some BinaryInteger) -> Int64 { Int64(truncatingIfNeeded: value) }
            let fields = [
                field(info.st_dev), field(info.st_ino), field(info.st_mode), field(info.st_uid),
                field(info.st_gid), field(info.st_nlink), field(info.st_size),
                field(info.st_mtim.tv_sec), field(info.st_mtim.tv_nsec),
                field(info.st_ctim.tv_sec), field(info.st_ctim.tv_nsec),
            ]
            fields.withUnsafeBytes { hasher.update(bufferPointer: $0) }
        }
    }
}
