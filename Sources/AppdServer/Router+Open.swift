import AppContainers
import AppdAPI
import AppdBase
import Foundation

extension Router {
    /// POST /v1/open: the handler of a URL chosen (HandlerRule) among the installed apps and
    /// launched with the URL as its last argument, after its `[App ID] Arguments=`.
    func open(_ request: Request) async throws -> Reply {
        let body = try await request.decode(OpenRequest.self, limit: maxRequestBytes)
        let item = try OpenItem(body.item)
        if case .file = item {
            throw AppdError(
                .unsupported,
                "opening files is not available yet: a file is granted to the app that opens it only once appd binds that one file into its sandbox",
                hint: "share it with appctl files, for an app with UIFileSharingEnabled")
        }
        let config = configuration.current
        let candidates = try store.apps().filter { $0.state == .installed }.map {
            HandlerCandidate(
                id: $0.appID, installedAt: $0.installedAt, handlers: $0.handlers(in: store.root))
        }
        let choice = try HandlerRule.choose(
            item, among: candidates, admin: config.handlers, named: body.with.map { AppID($0) })
        let arguments = (config.override(for: choice.app)?.service.arguments ?? []) + [item.text]
        let running = await supervisor.runningCount(app: choice.app)
        let instance = try await supervisor.launch(
            choice.app, arguments: arguments, caller: request.caller.uid)
        let note =
            running > 0
            ? "\(choice.app) was running: a new instance got the URL (a running instance is not handed one yet)"
            : nil
        return try .json(
            APIOpenResult(
                kind: "url", item: item.text, app: choice.app.spelling, chosenBy: choice.chosenBy,
                instance: instance, note: note),
            status: 201)
    }
}
