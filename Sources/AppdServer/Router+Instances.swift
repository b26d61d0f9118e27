import AppBundle
import AppdAPI
import AppdBase
import Foundation
import Glibc
import Supervisor

extension Router {
    func launch(_ id: String, _ request: Request) async throws -> Reply {
        if request.flag("attach") { return try await launchAttached(id, request) }
        let body = try await request.decode(LaunchRequest.self, limit: maxRequestBytes)
        try Self.checkLaunch(body)
        let (instance, timings) = try await supervisor.launchTimed(
            AppID(id), arguments: body.arguments, caller: request.caller.uid,
            background: body.background)
        // The daemon's stages of the launch (scripts/bench-launch prints them): cheap to measure,
        // free to ignore.
        return try .json(instance, status: 201, headers: [("Server-Timing", timings.serverTiming)])
    }

    /// GET /v1/instances: the answer for a version of the supervisor's instances is encoded
    /// once (InstanceListCache); 1,000 idle instances are one cached body.
    func listInstances(_ request: Request) async throws -> Reply {
        let app = request.app
        if let app { _ = try store.app(app.spelling) }
        let all = request.flag("all")
        let listed = await supervisor.listed(app: app, includeExited: all)
        let data = try instanceList.data(version: listed.version, app: app, all: all) {
            var data = try APICoding.encoder().encode(listed.instances.map(supervisor.withDenials))
            data.append(0x0A)
            return data
        }
        return .json(status: 200, data)
    }
}
