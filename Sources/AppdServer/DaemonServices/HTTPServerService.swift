import NIOCore
import NIOHTTP1
import ServiceLifecycle
import Supervisor

/// The API server, serving on the socket `Daemon` bound. On graceful shutdown it stops
/// accepting and returns once every connection is done; the long polls that would hold it
/// open (a `wait` lasts as long as its instance) are answered by shutting the supervisor down
/// at once, not only in its own turn.
struct HTTPServerService: Service {
    let server: HTTPServer
    let listener: NIOAsyncChannel<(HTTPServer.Connection, Caller)?, Never>
    let supervisor: Supervisor

    func run() async throws {
        do {
            try await withGracefulShutdownHandler {
                try await cancelWhenGracefulShutdown { [server, listener] in
                    try await server.serve(listener)
                }
            } onGracefulShutdown: { [supervisor] in
                Task { await supervisor.shutdown() }
            }
        } catch is CancellationError {}
    }
}
