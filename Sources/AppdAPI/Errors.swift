import AppdBase

/// The body of every error response: `{"error": {...}}`, the error's own Codable form inside
/// (`code`, `message`, `subject`?, `problems`, `errno`?, `hint`?, `cause`?), the shape
/// `appd --json` prints, so scripts read one shape.
public struct APIErrorBody: Codable, Sendable {
    public var error: AppdError

    public init(_ error: AppdError) { self.error = error }
}
