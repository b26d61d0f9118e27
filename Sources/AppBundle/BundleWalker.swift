import AppdBase
import Foundation
import PrintableText

/// Bounds on what a bundle may contain, from the `[Bundle]` section of appd.conf.
public struct BundleLimits: Sendable, Equatable {
    public var maxFiles: Int = 100_000
    public var maxTotalBytes: Int64 = 4 << 30
    /// Directory levels below the bundle root.
    public var maxDepth: Int = 32
    /// Bytes of a path relative to the bundle root.
    public var maxPathLength: Int = 1024
    public var maxInfoPlistBytes: Int = 1 << 20
    public var maxEntitlementsBytes: Int = 256 << 10

    public init() {}
}

/// One entry of a bundle tree as the walker saw it through an fd opened without following
/// symlinks. The checks (type, links, modes, limits) have already passed.
public struct BundleEntry: Sendable {
    public enum Kind: Sendable, Equatable {
        case directory
        case regularFile
        case symlink(target: String)
    }

    /// Relative to the bundle root, `/`-separated, never `.`/`..` components; empty only for
    /// the bundle directory itself, which `enterDirectory`/`leaveDirectory` see first and last.
    public let relativePath: String
    public let kind: Kind
    /// Permission bits only (`st_mode & 0o7777`).
    public let permissions: mode_t
    /// Bytes, for regular files; 0 otherwise.
    public let size: Int64

    public init(relativePath: String, kind: Kind, permissions: mode_t, size: Int64) {
        self.relativePath = relativePath
        self.kind = kind
        self.permissions = permissions
        self.size = size
    }

    public var isExecutable: Bool { permissions & 0o111 != 0 }
}

/// Receives the entries of a bundle in pre-order (a directory before its contents).
///
/// The installer's copier is one; `AppBundle.open` uses one that only counts. A visitor that
/// throws stops the walk: that is for I/O failures, not for bundle problems.
public protocol BundleVisitor {
    /// Whether `visitFile` needs an open descriptor for this file. Opening costs a few system
    /// calls per file, so a visitor that only counts says no and gets -1.
    func wantsDescriptor(for entry: BundleEntry) -> Bool
    mutating func enterDirectory(_ entry: BundleEntry, fd: Int32) throws
    /// Called once the directory's contents have all been visited.
    mutating func leaveDirectory(_ entry: BundleEntry, fd: Int32) throws
    /// `fd` is the open regular file (O_RDONLY|O_NOFOLLOW), valid only during the call, and
    /// positioned at offset 0. It is exactly the file the checks were made on.
    mutating func visitFile(_ entry: BundleEntry, fd: Int32) throws
    mutating func visitSymlink(_ entry: BundleEntry) throws
}

extension BundleVisitor {
    public func wantsDescriptor(for entry: BundleEntry) -> Bool { true }
}

/// What a walk found: counts, and every problem (the walk goes on past problems so a user sees
/// them all at once; entries with a problem are not handed to the visitor).
public struct BundleTree: Sendable {
    public var fileCount = 0
    /// Files, directories and symlinks below the root: what `MaxFiles` bounds.
    public var entryCount = 0
    public var totalBytes: Int64 = 0
    public var problems: [BundleProblem] = []
    /// Regular files and symlinks seen, by relative path, for the checks that need them
    /// (does the executable exist, is it executable, ...).
    public var entries: [String: BundleEntry] = [:]

    public init() {}
}

/// Walks a bundle tree through file descriptors, never following a symlink: every directory and
/// file is opened relative to its parent's fd with `O_NOFOLLOW`, and re-checked with `fstat`
/// after opening, so what a visitor receives is what was checked even if someone renames or
/// swaps entries during the walk.
///
/// Problems (hostile or unsupported entries, limits) are collected, not thrown, so one run shows
/// them all; the walk stops early only at a limit, or at 100 problems.
public enum BundleWalker {
    public static let maxProblems = 100

    /// What is wrong with an entry's permission bits, if anything: the one rule for a bundle on
    /// disk (`appd verify`, `install --no-daemon`) and one arriving as a tar stream (the
    /// daemon's extractor reads the header's mode), so no path accepts what another refuses.
    /// A setuid or setgid file would run with an identity the app was never given; a
    /// world-writable entry could be changed by anyone between verification and launch.
    public static func modeProblems(_ permissions: mode_t, isDirectory: Bool) -> [String] {
        var problems: [String] = []
        if isDirectory {
            if permissions & 0o002 != 0 { problems.append("the directory is world-writable") }
            return problems
        }
        if permissions & (S_ISUID | S_ISGID) != 0 { problems.append("is setuid or setgid") }
        if permissions & 0o002 != 0 { problems.append("is world-writable") }
        return problems
    }

    /// What is wrong with a regular file's link count, if anything: the one rule for a bundle
    /// on disk (`appd verify`, `install --no-daemon`) and for the client that streams one to the
    /// daemon (`BundleArchiveWriter`; the daemon's extractor refuses hard-link entries). A file
    /// linked elsewhere could be changed through its other name after it was verified.
    public static func linkProblem(_ linkCount: some BinaryInteger) -> String? {
        linkCount > 1 ? "has \(linkCount) hard links; bundle files must have one" : nil
    }

    public static func walk(
        _ path: String, limits: BundleLimits, visitor: inout some BundleVisitor
    ) throws -> BundleTree {
        // The bundle is the subject: each reader shows it by its own path for it.
        let bundle = AppdError.Subject(.bundle, view: path)
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if errno == ENOENT {
                throw AppdError(.notFound, "no such bundle directory", subject: bundle)
            }
            throw AppdError.system("stat", subject: bundle)
        }
        guard info.st_mode & S_IFMT != S_IFLNK else {
            throw AppdError(
                .invalidBundle, "is a symlink; name the bundle directory itself", subject: bundle)
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw AppdError(
                .invalidBundle, "is not a directory; a bundle is a Name.app folder",
                subject: bundle)
        }
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw AppdError.system("open", subject: bundle) }
        defer { close(fd) }
        var walk = Walk(limits: limits)
        let root = BundleEntry(
            relativePath: "", kind: .directory,
            permissions: info.st_mode & 0o7777, size: 0)
        try visitor.enterDirectory(root, fd: fd)
        try walk.directory(fd: fd, path: "", depth: 0, visitor: &visitor)
        walk.checkSymlinks()
        if !walk.stopped { try visitor.leaveDirectory(root, fd: fd) }
        return walk.tree
    }
}

/// The state of one walk.
private struct Walk {
    let limits: BundleLimits
    var tree = BundleTree()
    /// Set at a limit: the rest of the tree is not looked at.
    var stopped = false

    init(limits: BundleLimits) { self.limits = limits }

    mutating func problem(_ path: String, _ message: String) {
        guard !stopped else { return }
        if tree.problems.count == BundleWalker.maxProblems - 1 {
            tree.problems.append(
                BundleProblem("", "more than \(BundleWalker.maxProblems) problems; stopped looking")
            )
            stopped = true
            return
        }
        tree.problems.append(BundleProblem(path, message))
    }

    mutating func limit(_ message: String) {
        guard !stopped else { return }
        tree.problems.append(BundleProblem("", message))
        stopped = true
    }

    mutating func directory(fd: Int32, path: String, depth: Int, visitor: inout some BundleVisitor)
        throws
    {
        for name in try Self.names(in: fd, path: path) {
            if stopped { return }
            try entry(name, in: fd, parent: path, depth: depth, visitor: &visitor)
        }
    }

    /// The names in a directory, sorted by their bytes so every walk sees the same order.
    static func names(in fd: Int32, path: String) throws -> [[UInt8]] {
        let copy = dup(fd)
        guard copy >= 0, let dir = fdopendir(copy) else {
            if copy >= 0 { close(copy) }
            throw AppdError.system("read directory \(path.isEmpty ? "." : path)")
        }
        defer { closedir(dir) }
        rewinddir(dir)
        var names: [[UInt8]] = []
        while true {
            errno = 0
            guard let item = readdir(dir) else {
                if errno != 0 {
                    throw AppdError.system("read directory \(path.isEmpty ? "." : path)")
                }
                break
            }
            let name = directoryEntryName(item)
            if name == [46] || name == [46, 46] { continue }
            names.append(name)
        }
        return names.sorted { $0.lexicographicallyPrecedes($1) }
    }

    mutating func entry(
        _ rawName: [UInt8], in parent: Int32, parent parentPath: String, depth: Int,
        visitor: inout some BundleVisitor
    ) throws {
        let shown = String(decoding: rawName, as: UTF8.self)
        let displayPath = parentPath.isEmpty ? shown : parentPath + "/" + shown
        guard let name = String(validating: rawName, as: UTF8.self) else {
            return problem(displayPath, "the name is not valid UTF-8")
        }
        if let control = Printable.firstControl(in: name) {
            return problem(
                String(describing: Printable(displayPath)),
                "the name contains control characters (\(Printable.codePoint(control)))")
        }
        let path = displayPath
        guard path.utf8.count <= limits.maxPathLength else {
            return problem(
                path,
                "the path is \(path.utf8.count) bytes long, over the limit of \(limits.maxPathLength) (MaxPathLength)"
            )
        }
        var info = stat()
        guard fstatat(parent, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
            throw AppdError.system("stat \(path)")
        }
        tree.entryCount += 1
        guard tree.entryCount <= limits.maxFiles else {
            return limit("the bundle has more than \(limits.maxFiles) entries (MaxFiles)")
        }
        let permissions = info.st_mode & 0o7777
        switch info.st_mode & S_IFMT {
        case S_IFDIR:
            guard depth + 1 <= limits.maxDepth else {
                return problem(
                    path, "directories nest deeper than \(limits.maxDepth) levels (MaxDepth)")
            }
            for message in BundleWalker.modeProblems(permissions, isDirectory: true) {
                problem(path, message)
            }
            let fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else { throw AppdError.system("open \(path)") }
            defer { close(fd) }
            guard Self.same(fd, as: info) else { return problem(path, "changed while being read") }
            let entry = BundleEntry(
                relativePath: path, kind: .directory, permissions: permissions, size: 0)
            try visitor.enterDirectory(entry, fd: fd)
            try directory(fd: fd, path: path, depth: depth + 1, visitor: &visitor)
            if !stopped { try visitor.leaveDirectory(entry, fd: fd) }

        case S_IFREG:
            var bad = false
            if let message = BundleWalker.linkProblem(info.st_nlink) {
                problem(path, message)
                bad = true
            }
            for message in BundleWalker.modeProblems(permissions, isDirectory: false) {
                problem(path, message)
                bad = true
            }
            let size = Int64(info.st_size)
            tree.fileCount += 1
            tree.totalBytes += size
            guard tree.totalBytes <= limits.maxTotalBytes else {
                return limit(
                    "the bundle holds more than \(limits.maxTotalBytes) bytes (MaxTotalBytes)")
            }
            if bad { return }
            let entry = BundleEntry(
                relativePath: path, kind: .regularFile, permissions: permissions, size: size)
            tree.entries[path] = entry
            guard visitor.wantsDescriptor(for: entry) else {
                return try visitor.visitFile(entry, fd: -1)
            }
            let fd = openat(parent, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { throw AppdError.system("open \(path)") }
            defer { close(fd) }
            guard Self.same(fd, as: info) else { return problem(path, "changed while being read") }
            try visitor.visitFile(entry, fd: fd)

        case S_IFLNK:
            var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
            let n = readlinkat(parent, name, &buffer, buffer.count)
            guard n >= 0 else { throw AppdError.system("readlink \(path)") }
            guard n > 0 else { return problem(path, "is a symlink with an empty target") }
            guard let target = String(validating: buffer[..<n], as: UTF8.self),
                !target.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
            else { return problem(path, "is a symlink whose target is not printable UTF-8") }
            if target.hasPrefix("/") {
                return problem(
                    path,
                    "is a symlink to the absolute path \(target); links must stay inside the bundle"
                )
            }
            let entry = BundleEntry(
                relativePath: path, kind: .symlink(target: target), permissions: 0o777, size: 0)
            tree.entries[path] = entry
            try visitor.visitSymlink(entry)

        case S_IFCHR, S_IFBLK: problem(path, "is a device node")
        case S_IFIFO: problem(path, "is a FIFO")
        case S_IFSOCK: problem(path, "is a socket")
        default: problem(path, "is of an unknown file type")
        }
    }

    /// The fd names the inode that `fstatat` described (nobody swapped it in between).
    static func same(_ fd: Int32, as info: stat) -> Bool {
        var now = stat()
        return fstat(fd, &now) == 0 && now.st_dev == info.st_dev && now.st_ino == info.st_ino
            && now.st_mode & S_IFMT == info.st_mode & S_IFMT
    }

    /// Checks every symlink once the whole tree is known, resolving its target the way the
    /// kernel would (following the links it passes through), so a chain like `a -> s/../..`
    /// with `s -> .` is caught too.
    mutating func checkSymlinks() {
        for (path, entry) in tree.entries.sorted(by: { $0.key < $1.key }) {
            guard case .symlink(let target) = entry.kind else { continue }
            var hops = 0
            let parent = Array(path.split(separator: "/").dropLast())
            switch resolve(target, from: parent, hops: &hops) {
            case .inside: continue
            case .outside: problem(path, "is a symlink to \(target), which leads out of the bundle")
            case .loop: problem(path, "is a symlink to \(target), which loops")
            }
        }
    }

    enum Resolution { case inside, outside, loop }

    private func resolve(_ target: String, from directory: [Substring], hops: inout Int)
        -> Resolution
    {
        var current = directory
        return resolve(target, current: &current, hops: &hops)
    }

    private func resolve(_ target: String, current: inout [Substring], hops: inout Int)
        -> Resolution
    {
        if target.hasPrefix("/") { return .outside }
        for component in target.split(separator: "/") {
            if component == "." { continue }
            if component == ".." {
                if current.isEmpty { return .outside }
                current.removeLast()
                continue
            }
            current.append(component)
            guard case .symlink(let next) = tree.entries[current.joined(separator: "/")]?.kind
            else {
                continue
            }
            hops += 1
            if hops > 40 { return .loop }
            current.removeLast()
            let result = resolve(next, current: &current, hops: &hops)
            if result != .inside { return result }
        }
        return .inside
    }
}
