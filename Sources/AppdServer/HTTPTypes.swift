import AppdAPI
import AppdBase
import Foundation
import NIOCore
import NIOHTTP1

/// One request as the router sees it: the head, who sent it, and its body still on the wire.
struct Request {
    var method: HTTPMethod
    /// Percent-decoded path components after `/v1`.
    var segments: [String]
    var query: [String: String]
    var headers: HTTPHeaders
    var caller: Caller
    let body: RequestBody

    init(head: HTTPRequestHead, caller: Caller, body: RequestBody) throws {
        method = head.method
        headers = head.headers
        self.caller = caller
        self.body = body
        guard let components = URLComponents(string: head.uri) else {
            throw AppdError(.badRequest, "'\(head.uri.prefix(200))' is not a valid request target")
        }
        let path = components.percentEncodedPath
        guard path.hasPrefix("/v1/") || path == "/v1" else {
            throw AppdError(
                .notFound, "no route \(path.prefix(200)): every path starts with /v1",
                hint: "GET /v1/version answers if the daemon is up; docs/api.md lists the routes")
        }
        segments = try path.dropFirst(4).split(separator: "/", omittingEmptySubsequences: true).map
        { raw in
            guard let decoded = raw.removingPercentEncoding else {
                throw AppdError(.badRequest, "bad percent-encoding in '\(raw.prefix(200))'")
            }
            return decoded
        }
        query = [:]
        for item in components.queryItems ?? [] { query[item.name] = item.value ?? "" }
    }

    /// `?app=ID`: the app a query is narrowed to.
    var app: AppID? { query["app"].map { AppID($0) } }

    func flag(_ name: String) -> Bool {
        ["1", "true", "yes"].contains(query[name]?.lowercased() ?? "")
    }

    /// The whole body as `T`; an empty body decodes as `{}`.
    func decode<T: Decodable>(_ type: T.Type, limit: Int) async throws -> T {
        var data = try await body.collect(limit: limit)
        if data.isEmpty { data = Data("{}".utf8) }
        return try APICoding.decoder().decode(T.self, from: data)
    }
}

/// The parts of one connection, read in order by request after request.
final class PartReader {
    private var iterator: NIOAsyncChannelInboundStream<HTTPServerRequestPart>.AsyncIterator
    /// Armed only while waiting for a part: the client is slow then, not when a handler takes
    /// long (`wait` answers when the instance exits) or an answer streams.
    private let deadline: Deadline
    /// Armed when appd starts waiting for a request's head, disarmed at the end of its body:
    /// the whole request must arrive in that time, whatever the pace of its parts (a body
    /// trickled one byte at a time resets `deadline` on every part). nil: none (root).
    private let requestDeadline: Deadline?
    private var inRequest = false
    /// The input failed (a parse error, a reset): no request can be read to its end any more.
    /// Not so when appd stops (the task is cancelled): a request in flight is still answered.
    private(set) var broken = false

    init(
        _ inbound: NIOAsyncChannelInboundStream<HTTPServerRequestPart>, deadline: Deadline,
        requestDeadline: Deadline?
    ) {
        iterator = inbound.makeAsyncIterator()
        self.deadline = deadline
        self.requestDeadline = requestDeadline
    }

    deinit { requestDeadline?.cancel() }

    /// A head that announces no body is a whole request: the deadline ends with it, before the
    /// handler runs (a `wait` or an event stream may then take as long as it takes; their
    /// `.end` part is read only after them).
    func headArrived(_ head: HTTPRequestHead) {
        let length = head.headers[canonicalForm: "content-length"].first.flatMap { Int($0) } ?? 0
        if length == 0, !head.headers.contains(name: "transfer-encoding") {
            requestDeadline?.cancel()
        }
    }

    func next() async throws -> HTTPServerRequestPart? {
        if !inRequest {
            inRequest = true
            requestDeadline?.reset()
        }
        deadline.reset()
        defer { deadline.cancel() }
        do {
            let part = try await iterator.next()
            if case .end = part {
                inRequest = false
                requestDeadline?.cancel()
            }
            return part
        } catch  where !(error is CancellationError) {
            broken = true
            throw error
        }
    }
}

/// A request body read part by part from the connection (backpressure comes with it).
final class RequestBody {
    private let reader: PartReader
    private(set) var finished = false

    init(_ reader: PartReader) { self.reader = reader }

    /// The next chunk, or nil at the end of the body.
    func next() async throws -> ByteBuffer? {
        guard !finished else { return nil }
        guard let part = try await reader.next() else {
            finished = true
            throw AppdError(.badRequest, "the connection closed in the middle of the request body")
        }
        switch part {
        case .body(let buffer): return buffer
        case .end:
            finished = true
            return nil
        case .head:
            finished = true
            throw AppdError(.badRequest, "a request head arrived inside a body")
        }
    }

    func collect(limit: Int) async throws -> Data {
        var data = Data()
        while let chunk = try await next() {
            guard data.count + chunk.readableBytes <= limit else {
                throw AppdError(
                    .tooLarge, "the request body is over \(limit) bytes ([API] MaxRequestBytes)")
            }
            data.append(contentsOf: chunk.readableBytesView)
        }
        return data
    }

    /// Reads what the handler left, so the next request on the connection starts clean.
    func drain(limit: Int) async throws {
        var total = 0
        while let chunk = try await next() {
            total += chunk.readableBytes
            if total > limit {
                throw AppdError(.tooLarge, "the request body is over \(limit) bytes")
            }
        }
    }

}

/// What a handler answers.
enum Reply: Sendable {
    /// `headers`: besides Content-Type, Content-Length, Connection and Server.
    case json(status: Int, Data, headers: [(String, String)] = [])
    /// A chunked body written as it comes (logs, events, long polls, an attached launch); the
    /// connection closes after it. `headers`: besides Content-Type, Transfer-Encoding,
    /// Connection and Server (an attached launch's Server-Timing).
    case stream(
        contentType: String, headers: [(String, String)] = [],
        @Sendable (StreamWriter) async throws -> Void)

    static func json(_ value: some Encodable, status: Int = 200, headers: [(String, String)] = [])
        throws -> Reply
    {
        var data = try APICoding.encoder().encode(value)
        data.append(0x0A)
        return .json(status: status, data, headers: headers)
    }

    static func failure(_ failure: AppdError) -> Reply {
        var data = (try? APICoding.encoder().encode(APIErrorBody(failure))) ?? Data("{}".utf8)
        data.append(0x0A)
        return .json(status: failure.code.httpStatus, data)
    }
}

/// Where a streamed answer's bytes go: the answer itself, or frames in it (an attached launch).
protocol ByteSink: Sendable {
    func write(_ bytes: some Collection<UInt8>) async throws
}

/// Writes the chunks of a streamed answer.
struct StreamWriter: ByteSink {
    let outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>
    let allocator: ByteBufferAllocator

    func write(_ bytes: some Collection<UInt8>) async throws {
        guard !bytes.isEmpty else { return }
        var buffer = allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        try await outbound.write(.body(.byteBuffer(buffer)))
    }
}
