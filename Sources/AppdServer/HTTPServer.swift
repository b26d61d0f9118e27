import AppdAPI
import AppdBase
import CLinux
import Foundation
import Glibc
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// HTTP/1.1 on a Unix socket: one task per connection, requests read with backpressure,
/// answers written in order. Each connection carries the caller's credentials from the moment
/// it was accepted.
final class HTTPServer: Sendable {
    typealias Connection = NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>

    let router: Router
    let group: MultiThreadedEventLoopGroup
    /// A request's head and body must keep arriving: waiting this long for the next part closes
    /// the connection (slow clients, idle kept-alive connections). Only waiting for the client
    /// counts: a long poll or a streamed answer may take as long as it takes.
    let idleTimeout: TimeAmount
    /// A request's head and body must have arrived this long after appd began to wait for it
    /// (`[API] RequestTimeout`), however steadily they trickle in; else the connection closes.
    /// Not for root, whose requests (a large install) take as long as they take.
    let requestTimeout: TimeAmount

    init(
        router: Router, group: MultiThreadedEventLoopGroup, idleTimeout: TimeAmount = .seconds(30),
        requestTimeout: TimeAmount = .seconds(120)
    ) {
        self.router = router
        self.group = group
        self.idleTimeout = idleTimeout
        self.requestTimeout = requestTimeout
    }

    /// Listens on `path` (created with `mode` and `groupID`), or on `adopted`, a listening
    /// socket passed by systemd.
    ///
    /// Each connection is admitted (ConnectionLimits) as it is accepted, on the event loop: a
    /// refused one is answered there by a `RefusalHandler` and closed, a dropped one closed at
    /// once; neither reaches the tasks that serve requests (they arrive as nil). Accepting
    /// stays as cheap as it can be, so the backlog drains fast and root's connection, queued
    /// behind a flood of them, waits little.
    func bind(path: String?, adopted: Int32?, mode: mode_t, groupID: gid_t?) async throws
        -> NIOAsyncChannel<(Connection, Caller)?, Never>
    {
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .childChannelOption(.allowRemoteHalfClosure, value: false)
        let limits = router.limits
        let initializer: @Sendable (Channel) -> EventLoopFuture<(Connection, Caller)?> = {
            channel in
            Self.peerCredentials(channel).flatMap { caller in
                channel.eventLoop.makeCompletedFuture {
                    switch limits.admit(caller) {
                    case .admitted:
                        do {
                            try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                                withErrorHandling: true)
                            return (try Connection(wrappingChannelSynchronously: channel), caller)
                        } catch {
                            limits.release(caller)
                            throw error
                        }
                    case .refused(let failure):
                        channel.closeFuture.whenComplete { _ in limits.refused() }
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                            withErrorHandling: true)
                        try channel.pipeline.syncOperations.addHandler(RefusalHandler(failure))
                        return nil
                    case .dropped:
                        channel.close(promise: nil)
                        return nil
                    }
                }
            }
        }
        // Accepting is not held back by the task that takes admitted connections (NIO's
        // default stops accepting at 10 waiting): refused ones are settled as they are
        // accepted, and the backlog a root client waits in drains at the event loop's pace.
        let accepting = NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark(
            lowWatermark: 64, highWatermark: 256)
        if let adopted {
            return try await bootstrap.bind(
                adopted, serverBackPressureStrategy: accepting, childChannelInitializer: initializer
            )
        }
        guard let path else { throw AppdError(.invalidConfig, "no socket to listen on") }
        // The socket appears with the umask's mode; make it private until chown and chmod ran.
        let old = umask(0o177)
        defer { umask(old) }
        let server = try await bootstrap.bind(
            unixDomainSocketPath: path, cleanupExistingSocketFile: true,
            serverBackPressureStrategy: accepting, childChannelInitializer: initializer)
        if let groupID, chown(path, 0, groupID) != 0 {
            throw AppdError(
                .io, "chown \(path) to gid \(groupID) failed: \(String(cString: strerror(errno)))")
        }
        guard chmod(path, mode) == 0 else {
            throw AppdError(.io, "chmod \(path) failed: \(String(cString: strerror(errno)))")
        }
        return server
    }

    static func peerCredentials(_ channel: Channel) -> EventLoopFuture<Caller> {
        guard let provider = channel as? SocketOptionProvider else {
            return channel.eventLoop.makeFailedFuture(
                AppdError(.io, "no socket options on this channel"))
        }
        return provider.unsafeGetSocketOption(
            level: NIOBSDSocket.OptionLevel(rawValue: SOL_SOCKET),
            name: NIOBSDSocket.Option(rawValue: SO_PEERCRED)
        ).map { (credentials: appd_peer_credentials) in
            Caller(uid: credentials.uid, gid: credentials.gid, pid: credentials.pid)
        }
    }

    /// Accepts until the server channel closes (or the task is cancelled).
    func serve(_ server: NIOAsyncChannel<(Connection, Caller)?, Never>) async throws {
        try await withThrowingDiscardingTaskGroup { tasks in
            try await server.executeThenClose { inbound in
                for try await admitted in inbound {
                    // Refused and dropped connections were dealt with on the event loop.
                    guard let (connection, caller) = admitted else { continue }
                    tasks.addTask {
                        defer { self.router.limits.release(caller) }
                        await self.handle(connection, caller: caller)
                    }
                }
            }
        }
    }

    func handle(_ connection: Connection, caller: Caller) async {
        let channel = connection.channel
        do {
            try await connection.executeThenClose { inbound, outbound in
                let reader = PartReader(
                    inbound, deadline: Deadline(channel: channel, timeout: idleTimeout),
                    requestDeadline: caller.uid == 0
                        ? nil : Deadline(channel: channel, timeout: requestTimeout))
                while let part = try await reader.next() {
                    guard case .head(let head) = part else { continue }
                    reader.headArrived(head)
                    // curl asks before sending a body (an install's tar stream) and otherwise
                    // waits a second for an answer that never comes; a final answer may still
                    // follow (RFC 9110 10.1.1), so saying yes to every such request is correct.
                    if head.version.minor >= 1,
                        head.headers[canonicalForm: "expect"].contains(where: {
                            $0.lowercased() == "100-continue"
                        })
                    {
                        try await outbound.write(
                            .head(HTTPResponseHead(version: head.version, status: .continue)))
                    }
                    let body = RequestBody(reader)
                    let reply: Reply
                    var route = "invalid"
                    do {
                        let request = try Request(head: head, caller: caller, body: body)
                        route = Router.routeLabel(request)
                        reply = try await router.handle(request)
                    } catch {
                        reply = .failure(AppdError.answering(error))
                    }
                    router.metrics.recordRequest(route: route, status: reply.status)
                    var keepAlive = head.isKeepAlive
                    do {
                        try await body.drain(limit: 1 << 20)
                    } catch {
                        keepAlive = false
                    }
                    // A parse error inside the body was answered by NIO's error handler with 400
                    // already; a second answer to the same request breaks HTTP (and trips NIO's
                    // pipeline assertion, which killed a debug daemon).
                    if reader.broken { return }
                    if case .json = reply {
                        // An answer made is an answer sent, also when appd is stopping: NIO's
                        // writer refuses a cancelled task, and a launch's caller must learn its
                        // instance, a waiter that appd stops.
                        try await Task { [keepAlive] in
                            try await self.write(
                                reply, version: head.version, keepAlive: keepAlive, to: outbound,
                                channel: channel)
                        }.value
                    } else {
                        try await write(
                            reply, version: head.version, keepAlive: keepAlive, to: outbound,
                            channel: channel)
                    }
                    if case .stream = reply { return await flushed(channel) }
                    if !keepAlive { return await flushed(channel) }
                }
            }
        } catch {
            // The client went away or sent garbage: NIO already answered a parse error with
            // 400; there is nothing left to tell it.
        }
    }

    /// Returns once what was written has reached the socket: closing drops writes still
    /// pending, and an answer larger than the socket's buffer (`GET /v1/instances` with 1,000
    /// instances, 270 KB) is still pending when the handler returns — the client saw it break
    /// off. A client that stops reading is closed after the idle timeout.
    private func flushed(_ channel: Channel) async {
        let timer = channel.eventLoop.scheduleTask(in: idleTimeout) { channel.close(promise: nil) }
        defer { timer.cancel() }
        try? await channel.close(mode: .output).get()
    }

    private func write(
        _ reply: Reply, version: HTTPVersion, keepAlive: Bool,
        to outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>, channel: Channel
    ) async throws {
        var headers = HTTPHeaders()
        headers.add(name: "Server", value: "appd")
        switch reply {
        case .json(let status, let data, let extra):
            for (name, value) in extra { headers.add(name: name, value: value) }
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Content-Length", value: "\(data.count)")
            headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close")
            try await outbound.write(
                .head(
                    HTTPResponseHead(
                        version: version, status: .init(statusCode: status), headers: headers)))
            var buffer = channel.allocator.buffer(capacity: data.count)
            buffer.writeBytes(data)
            try await outbound.write(.body(.byteBuffer(buffer)))
            try await outbound.write(.end(nil))
        case .stream(let contentType, let extra, let produce):
            for (name, value) in extra { headers.add(name: name, value: value) }
            headers.add(name: "Content-Type", value: contentType)
            headers.add(name: "Transfer-Encoding", value: "chunked")
            headers.add(name: "Connection", value: "close")
            try await outbound.write(
                .head(HTTPResponseHead(version: version, status: .ok, headers: headers)))
            // A client that goes away while nothing is being written (an idle event stream, a
            // long poll) is noticed through the channel closing: the producer is cancelled.
            let writer = StreamWriter(outbound: outbound, allocator: channel.allocator)
            let producer = Task { try await produce(writer) }
            channel.closeFuture.whenComplete { _ in producer.cancel() }
            try await withTaskCancellationHandler {
                try await producer.value
            } onCancel: {
                producer.cancel()
            }
            try await outbound.write(.end(nil))
        }
    }
}

/// Closes a connection that sends nothing for `timeout`.
final class Deadline: Sendable {
    private let channel: Channel
    private let timeout: TimeAmount
    private let task = Mutex<Scheduled<Void>?>(nil)

    init(channel: Channel, timeout: TimeAmount) {
        self.channel = channel
        self.timeout = timeout
    }

    /// Arms it (again) from now.
    func reset() {
        let channel = channel
        let next = channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        task.withLock { task in
            task?.cancel()
            task = next
        }
    }

    func cancel() {
        task.withLock { task in
            task?.cancel()
            task = nil
        }
    }
}
