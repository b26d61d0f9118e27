import AppdAPI
import AppdBase

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's client: blocking HTTP/1.1 with JSON over its Unix socket (docs/api.md), one
/// connection per request. Every failure is an `AppdError`: the daemon's own (decoded from its
/// `{"error": ...}` body), or one the client makes — `unavailable` when nothing answers on the
/// socket, `badResponse` when what answers does not speak HTTP, `tooLarge` past the limits.
///
/// Each route has its typed method (`apps()`, `launch(_:_:)`, `terminate(_:grace:)`, ... in
/// AppdClient+Apps, +Instances, +System); `get`/`post`/`stream` below are what they are built
/// on, with paths percent-encoded by `AppdClient.path(_:query:)`.
public struct AppdClient: Sendable {
    public let socketPath: String
    /// `--host ssh://...`: requests go through ssh to that machine's appd (RemoteHost.swift).
    public internal(set) var remote: RemoteHost?
    /// Seconds one read or write may block; nil waits as long as the daemon takes (a `wait`, a
    /// followed log, the event stream all stay open for as long as there is something to wait for).
    public var timeout: Double?
    /// The largest answer `get`/`post`/`delete`/`upload` accept; streams have no limit.
    public var maxResponseBytes = 64 * 1024 * 1024
    /// The longest line `streamLines` accepts.
    public var maxLineBytes = 16 * 1024 * 1024

    /// Where `socketPath` came from (flag, environment, a root's daemon), for the hint when
    /// nothing answers there; nil when the caller gave the path itself.
    public var socketSource: APISocket.Source?

    public init(socketPath: String, timeout: Double? = nil) {
        self.socketPath = socketPath
        self.timeout = timeout
    }

    /// The daemon `--socket`, `$APPD_SOCKET`, `--root` or `$APPD_ROOT` points at, else the
    /// system's (`APISocket.resolve`).
    public init(
        socket: String?, root: String?,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) {
        let located = APISocket.locate(explicit: socket, root: root, environment: environment)
        self.init(socketPath: located.path)
        socketSource = located.source
    }

    // MARK: JSON

    public func get<T: Decodable>(_ path: String, as type: T.Type = T.self) throws(AppdError) -> T {
        try json(HTTPRequest(method: "GET", target: path, accept: Self.jsonType))
    }

    /// `body` as JSON (`APICoding`); a value that cannot be encoded is the caller's bad request.
    static func encoded(_ body: some Encodable, what: String) throws(AppdError) -> Data {
        do {
            return try APICoding.encoder().encode(body)
        } catch {
            throw AppdError(.badRequest, "cannot encode \(what): \(error)")
        }
    }

    /// A POST with `body` encoded as JSON (`APICoding`).
    public func post<T: Decodable>(_ path: String, body: some Encodable, as type: T.Type = T.self)
        throws(AppdError) -> T
    {
        let data = try Self.encoded(body, what: "the request for POST \(path)")
        return try json(
            HTTPRequest(
                method: "POST", target: path, accept: Self.jsonType,
                body: .data(data, contentType: Self.jsonType)))
    }

    /// A POST without a body (kill, suspend, resume).
    public func post<T: Decodable>(_ path: String, as type: T.Type = T.self) throws(AppdError) -> T
    {
        try json(HTTPRequest(method: "POST", target: path, accept: Self.jsonType))
    }

    public func delete<T: Decodable>(_ path: String, as type: T.Type = T.self) throws(AppdError)
        -> T
    {
        try json(HTTPRequest(method: "DELETE", target: path, accept: Self.jsonType))
    }

    /// A POST whose body `produce` writes as it goes, sent chunked: an install streams the
    /// bundle as a tar archive without knowing its size first. Errors `produce` throws abort
    /// the request and pass through as they are; if the daemon stops the upload by closing the
    /// connection, its answer (a 413, a 403) is what is thrown.
    public func upload<T: Decodable>(
        _ path: String, contentType: String, as type: T.Type = T.self, body produce: BodyProducer
    ) throws -> T {
        // The request holds the producer only while it is sent.
        try withoutActuallyEscaping(produce) { produce in
            let request = HTTPRequest(
                method: "POST", target: path, accept: Self.jsonType,
                body: .stream(contentType: contentType, produce))
            return try decode(T.self, from: exchange(request), for: request)
        }
    }

    // MARK: Streams

    /// A GET whose answer is handed to `onData` as it arrives (`logs?follow=1`), until the
    /// daemon ends it. What `onData` throws ends the stream and passes through.
    public func stream(
        _ path: String, method: String = "GET", accept: String = "*/*",
        onData: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let request = HTTPRequest(method: method, target: path, accept: accept)
        try perform(request) { head, reader in
            try checkStatus(head, reader, request)
            try reader.body(
                HTTPResponseReader.framing(of: head, method: request.method), deliver: onData)
        }
    }

    /// A GET whose answer is a stream of lines (`/v1/events`, NDJSON): `onLine` gets each one
    /// without its newline, as soon as it is complete.
    public func streamLines(
        _ path: String, accept: String = "application/x-ndjson", onLine: (Data) throws -> Void
    ) throws {
        var pending = Data()
        let limit = maxLineBytes
        try stream(path, accept: accept) { bytes in
            var rest = bytes[...]
            while let newline = rest.firstIndex(of: 0x0A) {
                pending.append(contentsOf: rest[rest.startIndex..<newline])
                if pending.last == 0x0D { pending.removeLast() }
                try onLine(pending)
                pending = Data()
                rest = rest[(newline + 1)...]
            }
            pending.append(contentsOf: rest)
            guard pending.count <= limit else {
                throw ResponseFailure.tooLarge("a line of the stream is longer than \(limit) bytes")
            }
        }
        if !pending.isEmpty { try onLine(pending) }
    }

    // MARK: Raw

    /// Any request, answered with its status, headers and body whatever the status (for tests
    /// and tools; the methods above turn a non-2xx answer into its `AppdError`).
    public func send(
        _ method: String, _ path: String, body: Data? = nil, contentType: String = jsonType
    ) throws(AppdError) -> HTTPResponse {
        let request = HTTPRequest(
            method: method, target: path, accept: "*/*",
            body: body.map { .data($0, contentType: contentType) } ?? .none)
        return try typed {
            try perform(request) { head, reader in
                HTTPResponse(
                    head: head, body: try collect(head, reader, request, limit: maxResponseBytes))
            }
        }
    }

    public static let jsonType = "application/json"

    // MARK: Plumbing

    private func json<T: Decodable>(_ request: HTTPRequest) throws(AppdError) -> T {
        let response = try typed { try exchange(request) }
        return try decode(T.self, from: response, for: request)
    }

    /// Sends `request` and returns its 2xx answer in full; anything else becomes its `AppdError`.
    private func exchange(_ request: HTTPRequest) throws -> HTTPResponse {
        try perform(request) { head, reader in
            try checkStatus(head, reader, request)
            return HTTPResponse(
                head: head, body: try collect(head, reader, request, limit: maxResponseBytes))
        }
    }

    private func decode<T: Decodable>(
        _ type: T.Type, from response: HTTPResponse, for request: HTTPRequest
    ) throws(AppdError) -> T {
        do {
            return try APICoding.decoder().decode(T.self, from: response.body)
        } catch {
            throw AppdError(
                .badResponse,
                "cannot read appd's answer to \(request.summary): \(Self.describe(decoding: error))",
                hint:
                    "appd and this client may be different versions: compare 'appctl version' with the installed appd"
            )
        }
    }

    /// Runs `body`, whose only errors are `AppdError`s, under a typed throw.
    private func typed<R>(_ body: () throws -> R) throws(AppdError) -> R {
        do {
            return try body()
        } catch let error as AppdError {
            throw error
        } catch {
            throw AppdError(.internal, "\(error)")
        }
    }

    func collect(
        _ head: HTTPResponseHead, _ reader: HTTPResponseReader, _ request: HTTPRequest, limit: Int
    ) throws -> Data {
        let framing = try HTTPResponseReader.framing(of: head, method: request.method)
        if case .length(let length) = framing, length > limit {
            throw ResponseFailure.tooLarge(
                "its Content-Length is \(length), the limit is \(limit) bytes")
        }
        var data = Data()
        try reader.body(framing) { bytes in
            guard data.count + bytes.count <= limit else {
                throw ResponseFailure.tooLarge("it is larger than \(limit) bytes")
            }
            data.append(contentsOf: bytes)
        }
        return data
    }

    /// Throws the `AppdError` of a non-2xx answer, reading (a bounded part of) its body.
    func checkStatus(
        _ head: HTTPResponseHead, _ reader: HTTPResponseReader, _ request: HTTPRequest
    ) throws {
        guard !(200..<300).contains(head.status) else { return }
        let body = try? collect(head, reader, request, limit: 1024 * 1024)
        throw answerError(head, body: body, request: request)
    }
}

/// A whole answer, as `AppdClient.send` returns it.
public struct HTTPResponse: Sendable {
    public var head: HTTPResponseHead
    public var body: Data

    public var status: Int { head.status }
}
