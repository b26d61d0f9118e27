import AppdAPI
import AppdBase
import Foundation
import NIOCore
import NIOHTTP1

/// Answers a connection over the `[API]` limits (ConnectionLimits) on the event loop, without
/// ever handing it to the tasks that serve requests: the first request gets the 429 or 503 (a
/// JSON error with a hint, like any other), then the connection closes once the request has
/// been read to its end, so the client reads the answer rather than a reset. A client that
/// takes longer than `ConnectionLimits.refusalTimeout` is closed unanswered.
final class RefusalHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let failure: AppdError
    private var answered = false
    private var timeout: Scheduled<Void>?

    init(_ failure: AppdError) { self.failure = failure }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        timeout = context.eventLoop.scheduleTask(in: .seconds(ConnectionLimits.refusalTimeout)) {
            channel.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) { timeout?.cancel() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head) where !answered:
            answered = true
            guard case .json(let status, let body, _) = Reply.failure(failure) else { return }
            var headers = HTTPHeaders()
            headers.add(name: "Server", value: "appd")
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Content-Length", value: "\(body.count)")
            headers.add(name: "Connection", value: "close")
            context.write(
                wrapOutboundOut(
                    .head(
                        HTTPResponseHead(
                            version: head.version, status: .init(statusCode: status),
                            headers: headers))),
                promise: nil)
            var buffer = context.channel.allocator.buffer(capacity: body.count)
            buffer.writeBytes(body)
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        case .end where answered:
            // The request is read whole: closing now cannot reset what the client still sends.
            context.close(promise: nil)
        default:
            break
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
