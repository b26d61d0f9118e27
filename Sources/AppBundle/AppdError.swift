import Foundation

/// The one error type of appd. Every failure a user can cause ends up here, with a code a
/// program can switch on and a message a person can act on.
public struct AppdError: Error, CustomStringConvertible, Sendable, Equatable {
    public enum Code: String, Sendable, Codable, CaseIterable {
        /// The bundle failed validation; `problems` lists every problem found.
        case invalidBundle
        case notFound
        case exists
        /// The request contradicts the installed state (case-only id clash, downgrade, ...).
        case conflict
        case permissionDenied
        case unsupported
        /// The configuration file is missing a value or holds a bad one.
        case invalidConfig
        /// The registry or the containers on disk are inconsistent or unreadable.
        case corruptState
        /// A system call failed; `errno` says how.
        case io
        /// The caller is at a cap of its own (per user, per app): it may try again once it
        /// holds less (HTTP 429).
        case tooManyRequests
        /// appd is at a cap of its own, for everyone but root (HTTP 503).
        case unavailable
    }

    public var code: Code
    public var message: String
    /// For `invalidBundle`: every problem, each naming the file it is about.
    public var problems: [BundleProblem]
    public var errno: Int32?
    /// What to do about it, when the cause is the host or the configuration.
    public var hint: String?

    public init(
        _ code: Code, _ message: String, problems: [BundleProblem] = [], errno: Int32? = nil,
        hint: String? = nil
    ) {
        self.code = code
        self.message = message
        self.problems = problems
        self.errno = errno
        self.hint = hint
    }

    /// A failed system call: `"open /var/lib/appd/staging/x: EACCES (Permission denied)"`.
    public static func system(_ step: String, errno: Int32 = Glibc.errno, hint: String? = nil)
        -> AppdError
    {
        AppdError(.io, "\(step): \(errnoName(errno)) (\(String(cString: strerror(errno))))",
            errno: errno, hint: hint)
    }

    public var description: String {
        var text = message
        for problem in problems { text += "\n  \(problem)" }
        if let hint { text += "\nhint: \(hint)" }
        return text
    }
}

/// One thing wrong with a bundle, tied to the file it is about.
extension AppdError {
    /// The same error with `path` replaced by `shown` wherever its text names it: a folder the
    /// reader never saw (the daemon's `incoming/<uuid>/`) becomes the one they gave.
    public func naming(_ path: String, as shown: String) -> AppdError {
        var copy = self
        copy.message = message.replacingOccurrences(of: path, with: shown)
        copy.hint = hint?.replacingOccurrences(of: path, with: shown)
        copy.problems = problems.map {
            BundleProblem(
                $0.path.replacingOccurrences(of: path, with: shown),
                $0.message.replacingOccurrences(of: path, with: shown))
        }
        return copy
    }
}

public struct BundleProblem: Sendable, Codable, Equatable, CustomStringConvertible {
    /// Path relative to the bundle root; empty for the bundle itself.
    public var path: String
    public var message: String

    public init(_ path: String, _ message: String) {
        self.path = path
        self.message = message
    }

    public var description: String { path.isEmpty ? message : "\(path): \(message)" }
}

/// The symbolic name of an errno value, which is what people search for.
public func errnoName(_ code: Int32) -> String {
    switch code {
    case EPERM: "EPERM"
    case ENOENT: "ENOENT"
    case EIO: "EIO"
    case EBADF: "EBADF"
    case EAGAIN: "EAGAIN"
    case ENOMEM: "ENOMEM"
    case EACCES: "EACCES"
    case EBUSY: "EBUSY"
    case EEXIST: "EEXIST"
    case EXDEV: "EXDEV"
    case ENOTDIR: "ENOTDIR"
    case EISDIR: "EISDIR"
    case EINVAL: "EINVAL"
    case ENFILE: "ENFILE"
    case EMFILE: "EMFILE"
    case EFBIG: "EFBIG"
    case ENOSPC: "ENOSPC"
    case EROFS: "EROFS"
    case EMLINK: "EMLINK"
    case ENAMETOOLONG: "ENAMETOOLONG"
    case ELOOP: "ELOOP"
    case ENOTEMPTY: "ENOTEMPTY"
    case EDQUOT: "EDQUOT"
    case ENOSYS: "ENOSYS"
    case EAFNOSUPPORT: "EAFNOSUPPORT"
    case ESRCH: "ESRCH"
    default: "errno \(code)"
    }
}
