import CLinux
import Glibc

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
        /// appd is at a cap of its own, for everyone but root, is stopping, or is not running
        /// (HTTP 503).
        case unavailable
        /// The request itself is malformed: bad JSON, a bad parameter (HTTP 400).
        case badRequest
        /// The request body is larger than the route takes (HTTP 413).
        case tooLarge
        /// The request body is not of a type the route takes (HTTP 415).
        case unsupportedMediaType
        /// The path exists but not with this method (HTTP 405).
        case methodNotAllowed
        /// The daemon's answer could not be read (the client's own code; never sent).
        case badResponse
        /// A failure appd did not foresee (HTTP 500).
        case `internal`

        /// The HTTP status each code travels with: every code has one.
        public var httpStatus: Int {
            switch self {
            case .notFound: 404
            case .exists, .conflict: 409
            case .permissionDenied: 403
            case .invalidBundle, .badRequest, .invalidConfig: 400
            case .tooLarge: 413
            case .tooManyRequests: 429
            case .unsupportedMediaType: 415
            case .methodNotAllowed: 405
            case .unsupported: 501
            case .unavailable: 503
            case .corruptState, .io, .badResponse, .internal: 500
            }
        }
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
        AppdError(.io, "\(step): \(errnoText(errno))", errno: errno, hint: hint)
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
        guard !path.isEmpty else { return self }
        var copy = self
        copy.message = message.replacing(path, with: shown)
        copy.hint = hint?.replacing(path, with: shown)
        copy.problems = problems.map {
            BundleProblem(
                $0.path.replacing(path, with: shown), $0.message.replacing(path, with: shown))
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

extension AppdError {
    /// The error as one line, as appd-oci logs it (podman reads its log as one object) and
    /// `appd verify` of an image prints it: the message, the first three problems, then the
    /// hint. The caller shows it by the one rule (Printable): an image chose some of it.
    public var oneLine: String {
        var line = message
        let shown = problems.prefix(3).map { "\($0)" }
        if !shown.isEmpty {
            line += ": " + shown.joined(separator: "; ")
            if problems.count > shown.count {
                line += "; and \(problems.count - shown.count) more"
            }
        }
        if let hint { line += " (hint: \(hint))" }
        return line
    }
}
