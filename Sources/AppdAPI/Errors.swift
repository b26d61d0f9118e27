import AppdBase

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// The body of every error response, and what the client throws: `{"error": {...}}` with the
/// same fields `appd --json` has always printed, so scripts read one shape.
public struct APIErrorBody: Codable, Sendable {
    public var error: APIError

    public init(_ error: APIError) { self.error = error }
}

public struct APIError: Error, Codable, Sendable, Equatable, CustomStringConvertible {
    /// `AppdError.Code` names (`notFound`, `permissionDenied`, `invalidBundle`, ...) plus the
    /// protocol's own: `badRequest`, `tooLarge`, `unavailable` (the daemon is not running).
    public var code: String
    public var message: String
    public var problems: [APIProblem]
    public var errno: Int32?
    public var hint: String?

    public init(
        code: String, message: String, problems: [APIProblem] = [], errno: Int32? = nil,
        hint: String? = nil
    ) {
        self.code = code
        self.message = message
        self.problems = problems
        self.errno = errno
        self.hint = hint
    }

    enum CodingKeys: String, CodingKey { case code, message, problems, errno, hint }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        code = try container.decode(String.self, forKey: .code)
        message = try container.decode(String.self, forKey: .message)
        problems = try container.decodeIfPresent([APIProblem].self, forKey: .problems) ?? []
        errno = try container.decodeIfPresent(Int32.self, forKey: .errno)
        hint = try container.decodeIfPresent(String.self, forKey: .hint)
    }

    /// As `AppdError` prints: the message, each problem on its own line, the errno, the hint.
    public var description: String {
        var text = message
        for problem in problems { text += "\n  \(problem)" }
        if let errno { text += " (\(String(cString: strerror(errno))))" }
        if let hint { text += "\n  hint: \(hint)" }
        return text
    }

    /// The HTTP status each code travels with: `AppdError.Code`'s, the one map; 500 for a code
    /// this side does not know (a newer daemon's).
    public var httpStatus: Int { AppdError.Code(rawValue: code)?.httpStatus ?? 500 }
}

/// One problem of a bundle, naming its file (relative to the bundle root; empty for the bundle).
public struct APIProblem: Codable, Sendable, Equatable, CustomStringConvertible {
    public var path: String
    public var message: String

    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    public var description: String { path.isEmpty ? message : "\(path): \(message)" }
}
