#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// Produces a request body piece by piece: it calls `write` as often as it likes, with buffers
/// valid only during the call. Whatever it throws aborts the request.
public typealias BodyProducer = (_ write: (UnsafeRawBufferPointer) throws -> Void) throws -> Void

/// One request as it goes on the wire.
struct HTTPRequest {
    enum Body {
        case none
        case data(Data, contentType: String)
        /// Sent with `Transfer-Encoding: chunked`, so nothing needs to know the length first.
        case stream(contentType: String, BodyProducer)
    }

    var method: String
    /// Path and query, already percent-encoded.
    var target: String
    var accept: String
    var body: Body = .none

    /// `GET /v1/apps`, for messages.
    var summary: String {
        let path = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? target
        return "\(method) \(path)"
    }

    /// The request line and headers. `Connection: close`: one request per connection keeps the
    /// client a loop of blocking calls, and a connect to a local socket costs microseconds.
    func head() -> [UInt8] {
        var lines = [
            "\(method) \(target) HTTP/1.1",
            "Host: localhost",
            "User-Agent: appd-client",
            "Accept: \(accept)",
            "Connection: close",
        ]
        switch body {
        case .none:
            if method == "POST" || method == "PUT" { lines.append("Content-Length: 0") }
        case .data(let data, let contentType):
            lines += ["Content-Type: \(contentType)", "Content-Length: \(data.count)"]
        case .stream(let contentType, _):
            lines += ["Content-Type: \(contentType)", "Transfer-Encoding: chunked"]
        }
        return Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8)
    }

    /// A target is sent as is: it must not be able to end the request line or add a header.
    static func isValidTarget(_ target: String) -> Bool {
        target.hasPrefix("/") && target.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }
}

/// Frames what a `BodyProducer` writes as chunks of up to `chunkSize` bytes. Small writes are
/// gathered (a tar stream comes in 512-byte headers); each chunk goes out with one `send`.
final class ChunkedWriter {
    static let chunkSize = 256 * 1024

    private let connection: UnixConnection
    private var pending: [UInt8] = []
    /// Set when a write failed: the producer may wrap or swallow the error, this keeps it.
    private(set) var failure: TransportError?

    init(connection: UnixConnection) {
        self.connection = connection
        pending.reserveCapacity(Self.chunkSize + 32)
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        if let failure { throw failure }
        var rest = bytes
        while !rest.isEmpty {
            let take = min(rest.count, Self.chunkSize - pending.count)
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[..<take]))
            rest = UnsafeRawBufferPointer(rebasing: rest[take...])
            if pending.count == Self.chunkSize { try flush() }
        }
    }

    private func flush() throws {
        guard !pending.isEmpty else { return }
        var chunk = Array("\(String(pending.count, radix: 16))\r\n".utf8)
        chunk.reserveCapacity(chunk.count + pending.count + 2)
        chunk += pending
        chunk += [0x0D, 0x0A]
        pending.removeAll(keepingCapacity: true)
        try send(chunk)
    }

    /// The last chunk and the empty trailer: the body is complete.
    func finish() throws {
        if let failure { throw failure }
        try flush()
        try send(Array("0\r\n\r\n".utf8))
    }

    private func send(_ bytes: [UInt8]) throws {
        do {
            try connection.write(bytes)
        } catch {
            failure = error
            throw error
        }
    }
}
