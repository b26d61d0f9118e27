import AppdAPI
import AppdBase
import Foundation
import Supervisor

extension Router {
    /// `GET /v1/denials[?app=ID|instance=IID][&follow=1]`: the kept denials, oldest first; with
    /// `follow=1` as JSON lines, then each new one as it is recorded, until the client goes.
    func denials(_ request: Request) async throws -> Reply {
        let app = request.app
        let instance = request.query["instance"]
        if app != nil && instance != nil {
            throw AppdError(.badRequest, "give app or instance, not both")
        }
        if let app { _ = try store.app(app.spelling) }
        if let instance { _ = try await supervisor.instance(instance) }
        let log = supervisor.denials
        let matches: @Sendable (APIDenial) -> Bool = { denial in
            if let instance, denial.instance?.caseInsensitiveCompare(instance) != .orderedSame {
                return false
            }
            if let app, !app.matches(denial.app) { return false }
            return true
        }
        guard request.flag("follow") else {
            let kept = log.list(app: app, instance: instance)
            let kernel = log.kernelStatus
            return try .json(
                APIDenials(
                    denials: kept.denials, dropped: kept.dropped, kernelReports: kernel.reports,
                    reason: kernel.reason))
        }
        // Subscribed before the kept ones are read: none falls between the two.
        let stream = supervisor.events()
        let kept = log.list(app: app, instance: instance).denials
        return .stream(contentType: "application/x-ndjson") { writer in
            let encoder = APICoding.encoder()
            var last = 0
            for denial in kept {
                var line = try encoder.encode(denial)
                line.append(0x0A)
                try await writer.write(line)
                last = denial.seq
            }
            for await event in stream {
                guard event.kind == .denial, let denial = event.denial, denial.seq > last,
                    matches(denial)
                else { continue }
                var line = try encoder.encode(denial)
                line.append(0x0A)
                try await writer.write(line)
            }
        }
    }
}
