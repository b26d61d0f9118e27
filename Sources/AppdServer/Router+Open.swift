import AppContainers
import AppdAPI
import AppdBase
import Foundation

extension Router {
    /// POST /v1/open: the handler of a URL chosen (HandlerRule) among the installed apps, each
    /// claim asked again of the signer policy in force, and launched with the URL as its last
    /// argument, after its `[App ID] Arguments=`.
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
        // What each app claims, as its signer's grant in force still allows (a reload that
        // takes a grant away takes the claim with it, as for AppdHostExecutables).
        let candidates = try store.apps().filter { $0.state == .installed }.map { app in
            var handlers = app.handlers(in: store.root)
            for index in handlers.urlTypes.indices {
                handlers.urlTypes[index].schemes.removeAll {
                    !config.signing.allowsURLScheme(
                        $0, keyID: app.signerKeyID, bundleID: app.bundleID)
                }
            }
            return HandlerCandidate(id: app.appID, installedAt: app.installedAt, handlers: handlers)
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
