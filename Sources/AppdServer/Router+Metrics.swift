import AppdAPI
import Foundation
import Supervisor

extension Router {
    /// `GET /v1/metrics`: Prometheus text exposition 0.0.4. The same right as `GET /v1/instances`
    /// (read): it tells which apps run and how much they use, no more than `appctl ps` does.
    func metricsText() async throws -> Reply {
        let installed = try store.apps().map(\.appID)
        let usage = Supervisor.sampleUsage(await supervisor.usageTargets())
        let ended = await supervisor.endedCPUSeconds()
        let text = await metrics.render(usage: usage, installed: installed, endedCPU: ended)
        // A body made whole before it is sent, as one chunk.
        return .stream(contentType: "text/plain; version=0.0.4; charset=utf-8") { writer in
            try await writer.write(text)
        }
    }

    /// `GET /v1/usage[?app=ID]`: memory and CPU time of each live instance now.
    func usage(_ request: Request) async throws -> Reply {
        if let app = request.app { _ = try store.app(app.spelling) }
        let targets = await supervisor.usageTargets(app: request.app)
        let sampledAt = Date()
        let instances = Supervisor.sampleUsage(targets).sorted {
            ($0.startedAt, $0.id) < ($1.startedAt, $1.id)
        }
        return try .json(APIUsage(sampledAt: sampledAt, instances: instances))
    }

    /// The route a request took, as its metrics label: the pattern, never the path it sent.
    static func routeLabel(_ request: Request) -> String {
        for route in routes where route.method == request.method {
            if match(route.pattern, request.segments) != nil {
                return "\(route.method) /v1/" + route.pattern.joined(separator: "/")
            }
        }
        return "unmatched"
    }
}
