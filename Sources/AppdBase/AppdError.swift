import CLinux
import Glibc

/// The one error type of appd, in process and on the wire. Every failure a user can cause ends
/// up here, with a code a program can switch on, a message a person can act on, what it is about
/// (a path under a named root, shown against the reader's own view of that root) and what
/// caused it. Its `Codable` form is the API's error body: the daemon encodes it, the client
/// decodes the same type.
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

        /// The HTTP status each code travels with: the one map, every code in it once.
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

        /// The code an answer without an error body reads as (a proxy's page): the inverse of
        /// `httpStatus`, the protocol's own code where a status has several.
        public init(status: Int) {
            let matching = Self.allCases.filter { $0.httpStatus == status }
            let preferred: [Code] = [.badRequest, .conflict, .internal]
            self =
                matching.first(where: preferred.contains) ?? matching.first
                ?? ((400..<500).contains(status) ? .badRequest : .internal)
        }
    }

    public var code: Code
    /// What went wrong, without the subject's location: the reader's view of the root is put
    /// in front of it when the error is shown (`description`).
    public var message: String
    /// The file or folder the error is about, if it is about one.
    public var subject: Subject?
    /// For `invalidBundle`: every problem, each naming the file it is about.
    public var problems: [BundleProblem]
    public var errno: Int32?
    /// What to do about it, when the cause is the host or the configuration.
    public var hint: String?
    private var causeBox: CauseBox?

    /// The error this one happened because of, if one did.
    public var cause: AppdError? {
        get { causeBox?.error }
        set { causeBox = newValue.map(CauseBox.init) }
    }

    public init(
        _ code: Code, _ message: String, subject: Subject? = nil, problems: [BundleProblem] = [],
        errno: Int32? = nil, hint: String? = nil, cause: AppdError? = nil
    ) {
        self.code = code
        self.message = message
        self.subject = subject
        self.problems = problems
        self.errno = errno
        self.hint = hint
        self.causeBox = cause.map(CauseBox.init)
    }

    /// `error` as the cause of another: itself when it is an AppdError, else an internal error
    /// with its description (a decoder's, the runtime's).
    public static func from(_ error: any Error) -> AppdError {
        error as? AppdError ?? AppdError(.internal, "\(error)")
    }

    /// A failed system call: `"open /var/lib/appd/staging/x: EACCES (Permission denied)"`, or
    /// with a subject, the step alone (`open Info.plist` under the bundle).
    public static func system(
        _ step: String, errno: Int32 = Glibc.errno, subject: Subject? = nil, hint: String? = nil
    ) -> AppdError {
        AppdError(.io, "\(step): \(errnoText(errno))", subject: subject, errno: errno, hint: hint)
    }

    /// The message after its subject as this side sees it (`../build/Broken.app: not a valid
    /// app bundle (1 problem)`), each problem on its own line, then the cause and the hint.
    public var description: String {
        var text = headline
        for problem in problems { text += "\n  \(problem)" }
        if let cause { text += "\n  because: \(cause.oneLine)" }
        if let hint { text += "\nhint: \(hint)" }
        return text
    }

    /// The message with the subject in front: `<subject>: <message>`.
    public var headline: String {
        guard let subject else { return message }
        return "\(subject): \(message)"
    }

    public static func == (lhs: AppdError, rhs: AppdError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.subject == rhs.subject
            && lhs.problems == rhs.problems && lhs.errno == rhs.errno && lhs.hint == rhs.hint
            && lhs.cause == rhs.cause
    }
}

/// Boxed so that an error can hold the error that caused it.
private final class CauseBox: Sendable {
    let error: AppdError
    init(_ error: AppdError) { self.error = error }
}

extension AppdError {
    /// What an error is about: a path relative to a named root. The root's location is the
    /// reader's: the daemon knows a bundle as `incoming/<uuid>/Notes.app`, the person who sent
    /// it as `../build/Notes.app`; each side renders the subject against its own view, so no
    /// message text is ever rewritten on the way.
    public struct Subject: Sendable, Equatable, Codable, CustomStringConvertible {
        public enum Root: String, Sendable, Codable, CaseIterable {
            /// The app bundle being installed, verified or signed (`Notes.app`).
            case bundle
            /// The tar stream being extracted: a bundle sent to the daemon, a backup restored.
            case archive

            /// How the root is shown to a reader with no view of it.
            var unseen: String {
                switch self {
                case .bundle: "the bundle"
                case .archive: "the archive"
                }
            }
        }

        public var root: Root
        /// Relative to the root, no leading `/`; empty for the root itself.
        public var path: String
        /// Where the root is for this reader; set by the side that shows the error, never sent.
        public var view: String?

        public init(_ root: Root, _ path: String = "", view: String? = nil) {
            self.root = root
            self.path = path
            self.view = view
        }

        enum CodingKeys: String, CodingKey { case root, path }

        /// `view/path`, or `the bundle: path` with no view.
        public var description: String {
            guard let view else { return path.isEmpty ? root.unseen : "\(root.unseen): \(path)" }
            if path.isEmpty { return view }
            return view.hasSuffix("/") || view.hasSuffix(":") ? view + path : "\(view)/\(path)"
        }
    }

    /// The same error, its subject and its causes' subjects under `root` shown as `view`. Only
    /// the view is set: the message is left as it was written.
    public func viewing(_ root: Subject.Root, as view: String) -> AppdError {
        var copy = self
        if copy.subject?.root == root { copy.subject?.view = view }
        copy.cause = cause?.viewing(root, as: view)
        return copy
    }

    /// This error as the cause of a new one.
    public func causing(
        _ code: Code? = nil, _ message: String, subject: Subject? = nil, hint: String? = nil
    ) -> AppdError {
        AppdError(code ?? self.code, message, subject: subject, hint: hint, cause: self)
    }
}

extension AppdError: Codable {
    enum CodingKeys: String, CodingKey {
        case code, message, subject, problems, errno, hint, cause
    }

    /// A code this side does not know (a newer daemon's) reads as `internal`, with the status
    /// that goes with it (500).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let raw = try container.decode(String.self, forKey: .code)
        self.init(
            Code(rawValue: raw) ?? .internal, try container.decode(String.self, forKey: .message),
            subject: try container.decodeIfPresent(Subject.self, forKey: .subject),
            problems: try container.decodeIfPresent([BundleProblem].self, forKey: .problems) ?? [],
            errno: try container.decodeIfPresent(Int32.self, forKey: .errno),
            hint: try container.decodeIfPresent(String.self, forKey: .hint),
            cause: try container.decodeIfPresent(AppdError.self, forKey: .cause))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(code, forKey: .code)
        try container.encode(message, forKey: .message)
        try container.encodeIfPresent(subject, forKey: .subject)
        try container.encode(problems, forKey: .problems)
        try container.encodeIfPresent(errno, forKey: .errno)
        try container.encodeIfPresent(hint, forKey: .hint)
        try container.encodeIfPresent(cause, forKey: .cause)
    }
}

/// One thing wrong with a bundle, tied to the file it is about.
public struct BundleProblem: Sendable, Codable, Equatable, CustomStringConvertible {
    /// Path relative to the bundle root; empty for the bundle itself.
    public var path: String
    public var message: String

    public init(_ path: String, _ message: String) {
        self.path = path
        self.message = message
    }

    public init(path: String, message: String) { self.init(path, message) }

    public var description: String { path.isEmpty ? message : "\(path): \(message)" }
}

extension AppdError {
    /// The error as one line, as appd-oci logs it (podman reads its log as one object) and
    /// `appd verify` of an image prints it: the message, the first three problems, then the
    /// cause and the hint. The caller shows it by the one rule (Printable): an image chose
    /// some of it.
    public var oneLine: String {
        var line = headline
        let shown = problems.prefix(3).map { "\($0)" }
        if !shown.isEmpty {
            line += ": " + shown.joined(separator: "; ")
            if problems.count > shown.count {
                line += "; and \(problems.count - shown.count) more"
            }
        }
        if let cause { line += " (because: \(cause.oneLine))" }
        if let hint { line += " (hint: \(hint))" }
        return line
    }
}
