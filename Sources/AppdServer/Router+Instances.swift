import AppBundle
import AppdAPI
import Foundation
import Glibc
import Supervisor

extension Router {
    func launch(_ id: String, _ request: Request) async throws -> Reply {
        let body = try await request.decode(LaunchRequest.self, limit: maxRequestBytes)
        guard body.arguments.count <= 4096, body.arguments.allSatisfy({ !$0.contains("\0") }) else {
            throw APIFailure.badRequest("arguments: at most 4096, none containing NUL")
        }
        return try .json(
            try await supervisor.launch(id, arguments: body.arguments, caller: request.caller.uid, background: body.background),
            status: 201)
    }

    func listInstances(_ request: Request) async throws -> Reply {
        if let app = request.query["app"] { _ = try store.app(app) }
        return try .json(await supervisor.instances(app: request.query["app"], includeExited: request.flag("all")))
    }
}
