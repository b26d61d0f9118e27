import AppContainers
import AppdAPI
import AppdBase

/// An error on its way to becoming an HTTP answer: a status and the `{"error": ...}` body.
public struct APIFailure: Error, Sendable {
    public var status: Int
    public var error: APIError

    public init(_ status: Int, _ code: String, _ message: String, hint: String? = nil) {
        self.status = status
        error = APIError(code: code, message: message, hint: hint)
    }

    public init(_ error: AppdError) {
        self.error = APIError(error)
        status = self.error.httpStatus
    }

    /// Any error a handler throws, as the client will see it. Errors appd did not foresee are
    /// 500s that still name what failed.
    static func from(_ error: any Error) -> APIFailure {
        switch error {
        case let failure as APIFailure: failure
        case let appd as AppdError: APIFailure(appd)
        case is DecodingError:
            APIFailure(
                400, "badRequest", "the request body is not the JSON this route takes: \(error)")
        // The server's tasks are cancelled when appd stops: a request still reading its body
        // ends there.
        case is CancellationError:
            APIFailure(
                503, "unavailable", "appd is stopping; the request was not carried out",
                hint: "send it again once appd is back")
        default: APIFailure(500, "io", "internal error: \(error)")
        }
    }

    static func badRequest(_ message: String) -> APIFailure {
        APIFailure(400, "badRequest", message)
    }
}
