import Foundation

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

    /// Relative to the bundle root, `/`-separated, never empty, never `.`/`..` components.
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
    mutating func enterDirectory(_ entry: BundleEntry, fd: Int32) throws
    /// Called once the directory's contents have all been visited.
    mutating func leaveDirectory(_ entry: BundleEntry, fd: Int32) throws
    /// `fd` is the open regular file (O_RDONLY|O_NOFOLLOW), valid only during the call, and
    /// positioned at offset 0. It is exactly the file the checks were made on.
    mutating func visitFile(_ entry: BundleEntry, fd: Int32) throws
    mutating func visitSymlink(_ entry: BundleEntry) throws
}

/// What a walk found: counts, and every problem (the walk goes on past problems so a user sees
/// them all at once; entries with a problem are not handed to the visitor).
public struct BundleTree: Sendable {
    public var fileCount = 0
    public var totalBytes: Int64 = 0
    public var problems: [BundleProblem] = []
    /// Regular files and symlinks seen, by relative path, for the checks that need them
    /// (does the executable exist, is it executable, ...).
    public var entries: [String: BundleEntry] = [:]

    public init() {}
}
