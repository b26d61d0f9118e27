import AppdAPI
import AppdBase

#if canImport(FoundationEssentials)
    import AppdBase
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

extension AppdClient {
    /// Connects, sends `request`, reads the answer's head and lets `handle` read the rest.
    /// Transport and protocol failures become `AppdError`s naming the request; what `handle`
    /// throws otherwise passes through.
    func perform<R>(
        _ request: HTTPRequest, handle: (HTTPResponseHead, HTTPResponseReader) throws -> R
    ) throws -> R {
        guard HTTPRequest.isValidTarget(request.target) else {
            throw AppdError(
                .badRequest,
                "'\(HTTPResponseReader.printable(request.target))' is not a request path (build it with AppdClient.path)"
            )
        }
        let connection: UnixConnection
        do {
            connection = try openConnection()
        } catch let error as TransportError {
            throw connectFailure(error)
        }
        do {
            return try perform(request, on: connection, handle: handle)
        } catch {
            // Through ssh, a failure before any answer is explained by ssh's exit and stderr.
            if let remote = connection.remote, !connection.receivedAnything,
                let explained = remote.failure()
            {
                throw explained
            }
            throw error
        }
    }

    private func perform<R>(
        _ request: HTTPRequest, on connection: UnixConnection,
        handle: (HTTPResponseHead, HTTPResponseReader) throws -> R
    ) throws -> R {
        // A write that failed because the daemon closed its end: it may have said why first
        // (403, 413 during an upload), so its answer is read before giving up.
        let writeFailure: TransportError?
        do {
            writeFailure = try send(request, on: connection)
        } catch let error as TransportError {
            guard error.peerClosed else { throw transportFailure(error, request) }
            writeFailure = error
        }
        let reader = HTTPResponseReader(read: { try connection.read(into: $0) })
        do {
            let head = try reader.head()
            if let writeFailure, (200..<300).contains(head.status) {
                throw transportFailure(writeFailure, request)
            }
            return try handle(head, reader)
        } catch let failure as ResponseFailure {
            if let writeFailure, !reader.receivedAnything {
                throw transportFailure(writeFailure, request)
            }
            throw describe(failure, request)
        }
    }

    /// Writes the request; returns the write failure a body producer swallowed, if any.
    private func send(_ request: HTTPRequest, on connection: UnixConnection) throws
        -> TransportError?
    {
        switch request.body {
        case .none:
            try connection.write(request.head())
            return nil
        case .data(let data, _):
            // Head and body in one write: the daemon reads the whole request at once (two
            // writes cost a second wake-up of its event loop, and a send each).
            var bytes = request.head()
            bytes.append(contentsOf: data)
            try connection.write(bytes)
            return nil
        case .stream(_, let produce):
            try connection.write(request.head())
            let writer = ChunkedWriter(connection: connection)
            do {
                try produce(writer.write)
                try writer.finish()
                return nil
            } catch {
                // The producer's own failure (a file it cannot read) aborts: the daemon sees a
                // body without its last chunk and drops it. A failed write is the daemon's doing.
                guard let failure = writer.failure else { throw error }
                guard failure.peerClosed else { throw transportFailure(failure, request) }
                return failure
            }
        }
    }

    func transportFailure(_ error: TransportError, _ request: HTTPRequest) -> AppdError {
        switch error {
        case .timedOut:
            let seconds = timeout.map { TextFormatting.printf("%g", $0) } ?? "?"
            return AppdError(
                .unavailable, "appd did not answer \(request.summary) within \(seconds) s",
                hint: "is it stuck? systemctl status appd")
        case .read(let code), .write(let code):
            return AppdError(
                .unavailable,
                "lost the connection to appd during \(request.summary): \(errnoText(code))",
                errno: code,
                hint: "it may have stopped or restarted: systemctl status appd, journalctl -u appd")
        case .connect, .pathTooLong, .socket:
            return connectFailure(error)
        }
    }

    func describe(_ failure: ResponseFailure, _ request: HTTPRequest) -> AppdError {
        switch failure {
        case .transport(let error):
            return transportFailure(error, request)
        case .noAnswer:
            return AppdError(
                .unavailable, "appd closed the connection without answering \(request.summary)",
                hint: "it may have stopped or restarted: systemctl status appd, journalctl -u appd")
        case .truncated(let what):
            return AppdError(.unavailable, "appd's answer to \(request.summary) broke off: \(what)")
        case .malformed(let what):
            return AppdError(
                .badResponse, "the answer to \(request.summary) is not valid HTTP: \(what)",
                hint: "is \(socketPath) appd's socket?")
        case .tooLarge(let what):
            return AppdError(.tooLarge, "appd's answer to \(request.summary) is too large: \(what)")
        }
    }
}
