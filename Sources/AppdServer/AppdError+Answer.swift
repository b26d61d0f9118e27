import AppdBase

extension AppdError {
    /// Any error a handler throws, as the client will see it (the status is its code's).
    /// Errors appd did not foresee are 500s that still name what failed.
    static func answering(_ error: any Error) -> AppdError {
        switch error {
        case let appd as AppdError: appd
        case is DecodingError:
            AppdError(.badRequest, "the request body is not the JSON this route takes: \(error)")
        // The server's tasks are cancelled when appd stops: a request still reading its body
        // ends there.
        case is CancellationError:
            AppdError(
                .unavailable, "appd is stopping; the request was not carried out",
                hint: "send it again once appd is back")
        default: AppdError(.io, "internal error: \(error)")
        }
    }
}
