/// What an app sees of a host path, and why: `appd profile ID --path P`. A sandbox that hides
/// a file says nothing when the app looks for it (the app gets ENOENT from its own empty root,
/// no denial is logged), so "No denials." after an escape attempt needs this to read right.
///
/// Worked out from the profile alone, as appd-exec builds the root: an empty tmpfs, then each
/// mount in order (a later mount at or above a path covers what was there), then Landlock,
/// whose rules add up along the path (a rule on a directory covers all below it). The file's
/// own owner and mode still apply on top, for the app's uid.
public struct PathAccess: Sendable, Equatable, Codable {
    public enum Verdict: String, Sendable, Codable {
        /// Not in the app's root, or something else is at that path there.
        case hidden
        /// In the app's root, but Landlock grants nothing there.
        case noAccess = "no-access"
        case readOnly = "read-only"
        case readWrite = "read-write"
    }

    /// The path asked about, made absolute and without `.`/`..`.
    public var path: String
    public var verdict: Verdict
    /// The app may execute files there (Landlock rx or rwx, on a mount that is not noexec).
    public var executable: Bool
    /// The mount that decides, as `appd profile --full` lists it (nil: none).
    public var mount: String?
    /// The Landlock rules that cover the path (empty: none, or Landlock is off).
    public var landlock: [String]
    /// Why, in one sentence.
    public var reason: String
}

extension SandboxProfile {
    /// Symlinks of the app's root followed at most this many times (as the kernel's 40, far
    /// more than a root of system binds ever has).
    static let maxLinks = 8

    /// How the app sees the host's `path` (absolute).
    public func access(toHostPath path: String) -> PathAccess {
        var current = Self.normalized(path)
        var followed: [String] = []
        while true {
            guard let mount = coveringMount(current) else {
                return PathAccess(
                    path: current, verdict: .hidden, executable: false, mount: nil, landlock: [],
                    reason:
                        "nothing of the host at \(current) is mounted in the app's root (an empty tmpfs with only the mounts appd profile --full lists)"
                        + Self.via(followed))
            }
            let shown = Self.describe(mount)
            let destination = Self.normalized(mount.destination)
            switch mount.kind {
            case .symlink:
                guard followed.count < Self.maxLinks, let target = mount.source else {
                    return PathAccess(
                        path: current, verdict: .hidden, executable: false, mount: shown,
                        landlock: [],
                        reason: "too many symlinks in the app's root")
                }
                followed.append("\(destination) -> \(target)")
                let rest = String(current.dropFirst(destination == "/" ? 0 : destination.count))
                let base =
                    target.hasPrefix("/") ? target : Self.parent(of: destination) + "/" + target
                current = Self.normalized(base + rest)
                continue
            case .roBind, .roBindTry, .rwBind, .rwBindExec, .devBind:
                guard let source = mount.source,
                    Self.normalized(
                        source + "/"
                            + String(current.dropFirst(destination == "/" ? 0 : destination.count)))
                        == current
                else {
                    return PathAccess(
                        path: current, verdict: .hidden, executable: false, mount: shown,
                        landlock: [],
                        reason:
                            "the app sees \(mount.source ?? "another host path") at \(destination), not the host's \(current)"
                            + Self.via(followed))
                }
                return landlockVerdict(current, mount: mount, shown: shown, followed: followed)
            case .tmpfs, .proc, .dev, .dir, .file, .fs, .mask, .roPath, .node:
                let instead =
                    switch mount.kind {
                    case .tmpfs: "an empty tmpfs of its own"
                    case .proc: "its own procfs (its pid namespace)"
                    case .dev: "its own minimal /dev"
                    case .dir: "an empty directory"
                    default: "a file appd generates"
                    }
                return PathAccess(
                    path: current, verdict: .hidden, executable: false, mount: shown, landlock: [],
                    reason: "the app sees \(instead) at \(destination), not the host's"
                        + Self.via(followed))
            }
        }
    }

    /// Landlock on top of a bind that shows the host's path.
    private func landlockVerdict(_ path: String, mount: Mount, shown: String, followed: [String])
        -> PathAccess
    {
        let writableMount = [.rwBind, .rwBindExec, .devBind].contains(mount.kind)
        guard landlock.minimumABI > 0 else {
            return PathAccess(
                path: path, verdict: writableMount ? .readWrite : .readOnly, executable: true,
                mount: shown,
                landlock: [],
                reason: "mount \(shown); Landlock is OFF (WeakerModes=)" + Self.via(followed))
        }
        let rules = landlock.paths.filter { Self.covers($0.path, path) }
        let names = rules.map { "\($0.access.rawValue) \($0.path)" }
        guard !rules.isEmpty else {
            return PathAccess(
                path: path, verdict: .noAccess, executable: false, mount: shown, landlock: [],
                reason:
                    "mount \(shown), but no Landlock rule covers it: every access is refused (and logged as a denial)"
                    + Self.via(followed))
        }
        let writes = rules.contains { $0.access == .rw || $0.access == .rwx }
        let executes = rules.contains { $0.access == .rx || $0.access == .rwx }
        let verdict: PathAccess.Verdict = writableMount && writes ? .readWrite : .readOnly
        var reason = "mount \(shown); Landlock \(names.joined(separator: ", "))"
        if writes && !writableMount { reason += "; the mount is read-only" }
        if writableMount && !writes { reason += "; Landlock allows no writes" }
        return PathAccess(
            path: path, verdict: verdict, executable: executes, mount: shown, landlock: names,
            reason: reason + Self.via(followed))
    }

    /// The last mount at `path` or above it: mounts are made in order, and one at a directory
    /// covers whatever an earlier one put below it.
    private func coveringMount(_ path: String) -> Mount? {
        mounts.last { Self.covers(Self.normalized($0.destination), path) }
    }

    /// `directory` is `path` or one of its ancestors, component by component.
    static func covers(_ directory: String, _ path: String) -> Bool {
        directory == "/" || path == directory
            || path.hasPrefix(directory.hasSuffix("/") ? directory : directory + "/")
    }

    /// Absolute, without empty, `.` and `..` components (lexically: the app's root decides
    /// what a symlink means, and those are followed above).
    static func normalized(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/") {
            if part == "." { continue }
            if part == ".." {
                _ = parts.popLast()
                continue
            }
            parts.append(part)
        }
        return "/" + parts.joined(separator: "/")
    }

    static func parent(of path: String) -> String {
        let normal = normalized(path)
        guard let slash = normal.lastIndex(of: "/"), slash != normal.startIndex else { return "" }
        return String(normal[..<slash])
    }

    static func describe(_ mount: Mount) -> String {
        switch mount.kind {
        case .roBind, .roBindTry: "\(mount.destination) read-only"
        case .rwBind: "\(mount.destination) read-write"
        case .rwBindExec: "\(mount.destination) read-write, executable"
        case .devBind: "\(mount.destination) device"
        case .symlink: "\(mount.destination) -> \(mount.source ?? "")"
        case .tmpfs: "\(mount.destination) tmpfs"
        case .proc: "\(mount.destination) procfs"
        case .dev: "\(mount.destination) dev"
        case .dir: "\(mount.destination) directory"
        case .file: "\(mount.destination) generated"
        case .fs: "\(mount.destination) \(mount.fsType ?? "")"
        case .mask: "\(mount.destination) masked"
        case .roPath: "\(mount.destination) read-only"
        case .node: "\(mount.destination) device node (nodev)"
        }
    }

    private static func via(_ followed: [String]) -> String {
        followed.isEmpty
            ? ""
            : " (through the symlink\(followed.count > 1 ? "s" : "") \(followed.joined(separator: ", ")))"
    }
}
