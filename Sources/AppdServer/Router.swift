import AppContainers
import AppdAPI
import AppdBase
import AppdConfig
import Foundation
import NIOHTTP1
import Supervisor

/// Maps `METHOD /v1/...` to a handler after checking the caller's right. The table below is
/// the whole API; docs/api.md lists the same routes (APIDocTests compares them).
final class Router: Sendable {
    let store: AppStore
    let configuration: LiveConfiguration
    let supervisor: Supervisor
    let installer: Installer
    let reloader: ConfigurationReloader
    let startedAt = Date()
    let appList: AppListCache
    let instanceList = InstanceListCache()
    let limits: ConnectionLimits
    let metrics = DaemonMetrics()

    init(
        store: AppStore, configuration: LiveConfiguration, supervisor: Supervisor,
        installer: Installer,
        reloader: ConfigurationReloader
    ) {
        self.store = store
        self.configuration = configuration
        self.supervisor = supervisor
        self.installer = installer
        self.reloader = reloader
        // The caps are fixed for the daemon's life (a reload reports them as restart-only); who
        // is an admin follows the [API] lists as last (re)loaded.
        limits = ConnectionLimits(settings: configuration.current.api) {
            Authorizer(settings: configuration.current.api).rights(of: $0).contains(.admin)
        }
        appList = AppListCache(registryPath: store.root.registryPath)
        supervisor.observeEvents { [metrics] in metrics.record($0) }
        // appd_denials_total: the denial log's per-app counts (every denial seen, kept or
        // dropped over the rate limit), read at scrape time.
        let denialLog = supervisor.denials
        metrics.denials.withLock { $0 = { denialLog.perAppCounts() } }
        let reclaims = supervisor.cacheReclaims
        metrics.cacheReclaims.withLock { $0 = { reclaims.perApp() } }
        let fetches = supervisor.fetchCounts
        metrics.fetches.withLock { $0 = { fetches.perApp() } }
    }

    /// `[API]` as last (re)loaded: who may do what, and how large a request may be.
    var authorizer: Authorizer { Authorizer(settings: configuration.current.api) }
    var maxRequestBytes: Int { Int(clamping: configuration.current.api.maxRequestBytes) }

    struct Route: Sendable {
        var method: HTTPMethod
        /// Path components after /v1; `{x}` matches any one component.
        var pattern: [String]
        var right: Right
        var handler: @Sendable (Router, Request, [String]) async throws -> Reply
    }

    static let routes: [Route] = [
        Route(method: .GET, pattern: ["version"], right: .read) { r, q, _ in try r.version(q) },
        Route(method: .GET, pattern: ["apps"], right: .read) { r, _, _ in try await r.listApps() },
        Route(method: .POST, pattern: ["apps"], right: .admin) { r, q, _ in try await r.install(q)
        },
        Route(method: .GET, pattern: ["apps", "{id}"], right: .read) { r, _, p in
            try await r.appInfo(p[0])
        },
        Route(method: .DELETE, pattern: ["apps", "{id}"], right: .admin) { r, q, p in
            try await r.uninstall(p[0], q)
        },
        Route(method: .GET, pattern: ["apps", "{id}", "containers", "{kind}"], right: .read) {
            r, _, p in
            try await r.container(p[0], kind: p[1], group: nil)
        },
        Route(
            method: .GET, pattern: ["apps", "{id}", "containers", "group", "{group}"], right: .read
        ) { r, _, p in
            try await r.container(p[0], kind: "group", group: p[1])
        },
        Route(method: .GET, pattern: ["apps", "{id}", "files"], right: .control) { r, _, p in
            try await r.listFiles(p[0])
        },
        Route(method: .GET, pattern: ["apps", "{id}", "files", "content"], right: .control) {
            r, q, p in
            try await r.getFile(p[0], q)
        },
        Route(method: .POST, pattern: ["apps", "{id}", "files", "content"], right: .control) {
            r, q, p in
            try await r.putFile(p[0], q)
        },
        Route(method: .DELETE, pattern: ["apps", "{id}", "files", "content"], right: .control) {
            r, q, p in
            try await r.removeFile(p[0], q)
        },
        Route(method: .GET, pattern: ["apps", "{id}", "defaults"], right: .admin) { r, _, p in
            try await r.readDefaults(p[0])
        },
        Route(method: .POST, pattern: ["apps", "{id}", "defaults"], right: .admin) { r, q, p in
            try await r.changeDefaults(p[0], q)
        },
        Route(method: .POST, pattern: ["apps", "{id}", "backup"], right: .admin) { r, q, p in
            try await r.backup(p[0], q)
        },
        Route(method: .POST, pattern: ["apps", "{id}", "restore"], right: .admin) { r, q, p in
            try await r.restore(p[0], q)
        },
        Route(method: .POST, pattern: ["apps", "{id}", "launch"], right: .control) { r, q, p in
            try await r.launch(p[0], q)
        },
        Route(method: .POST, pattern: ["open"], right: .control) { r, q, _ in
            try await r.open(q)
        },
        Route(method: .GET, pattern: ["instances"], right: .read) { r, q, _ in
            try await r.listInstances(q)
        },
        Route(method: .GET, pattern: ["instances", "{iid}"], right: .read) { r, _, p in
            try .json(try await r.supervisor.instance(p[0]))
        },
        Route(method: .GET, pattern: ["instances", "{iid}", "wait"], right: .control) { r, _, p in
            let instance = try await r.supervisor.waitForExit(p[0])
            guard instance.state == .exited else {
                throw AppdError(
                    .unavailable,
                    "appd is stopping; instance \(instance.id) is still \(instance.state)",
                    hint: "it keeps running; wait again once appd is back")
            }
            return try .json(instance)
        },
        Route(method: .POST, pattern: ["instances", "{iid}", "terminate"], right: .control) {
            r, q, p in
            let body = try await q.decode(TerminateRequest.self, limit: r.maxRequestBytes)
            if let grace = body.grace, !(0...3600).contains(grace) {
                throw AppdError(
                    .badRequest,
                    "grace must be between 0 and 3600 seconds, not \(grace)")
            }
            return try .json(try await r.supervisor.terminate(p[0], grace: body.grace), status: 202)
        },
        Route(method: .POST, pattern: ["instances", "{iid}", "restart"], right: .control) {
            r, q, p in
            let body = try await q.decode(TerminateRequest.self, limit: r.maxRequestBytes)
            if let grace = body.grace, !(0...3600).contains(grace) {
                throw AppdError(
                    .badRequest,
                    "grace must be between 0 and 3600 seconds, not \(grace)")
            }
            return try .json(
                try await r.supervisor.restart(p[0], grace: body.grace, caller: q.caller.uid),
                status: 201)
        },
        Route(method: .GET, pattern: ["services"], right: .read) { r, _, _ in
            try .json(await r.supervisor.services())
        },
        Route(method: .POST, pattern: ["instances", "{iid}", "kill"], right: .control) { r, _, p in
            try .json(try await r.supervisor.kill(p[0]), status: 202)
        },
        Route(method: .POST, pattern: ["instances", "{iid}", "suspend"], right: .control) {
            r, _, p in
            try .json(try await r.supervisor.suspend(p[0]))
        },
        Route(method: .POST, pattern: ["instances", "{iid}", "resume"], right: .control) {
            r, _, p in
            try .json(try await r.supervisor.resume(p[0]))
        },
        Route(method: .POST, pattern: ["instances", "{iid}", "activate"], right: .control) {
            r, _, p in
            try .json(try await r.supervisor.activate(p[0]))
        },
        Route(method: .POST, pattern: ["instances", "{iid}", "background"], right: .control) {
            r, _, p in
            try .json(try await r.supervisor.background(p[0]))
        },
        Route(method: .POST, pattern: ["memory-warning"], right: .control) { r, q, _ in
            if let app = q.app { _ = try r.store.app(app.spelling) }
            return try .json(
                APIMemoryWarning(delivered: await r.supervisor.memoryWarning(app: q.app)))
        },
        Route(method: .GET, pattern: ["instances", "{iid}", "logs"], right: .control) { r, q, p in
            try await r.logs(p[0], q)
        },
        Route(method: .GET, pattern: ["events"], right: .read) { r, q, _ in try r.events(q) },
        Route(method: .GET, pattern: ["denials"], right: .read) { r, q, _ in try await r.denials(q)
        },
        Route(method: .POST, pattern: ["reload"], right: .admin) { r, _, _ in
            try .json(try await r.reloader.reload())
        },
        Route(method: .POST, pattern: ["reclaim-caches"], right: .admin) { r, q, _ in
            try .json(
                try await r.supervisor.reclaimCaches(app: q.app, byHand: true))
        },
        Route(method: .GET, pattern: ["metrics"], right: .read) { r, _, _ in
            try await r.metricsText()
        },
        Route(method: .GET, pattern: ["usage"], right: .read) { r, q, _ in try await r.usage(q) },
    ]

    func handle(_ request: Request) async throws -> Reply {
        var pathMatched = false
        for route in Self.routes {
            guard let parameters = Self.match(route.pattern, request.segments) else { continue }
            pathMatched = true
            guard route.method == request.method else { continue }
            try authorizer.check(request.caller, route.right)
            guard Self.isLongLived(route, request) else {
                return try await route.handler(self, request, parameters)
            }
            // Held by the reply while it streams, or until a long poll answers.
            let slot = try limits.openStream(request.caller)
            let reply = try await route.handler(self, request, parameters)
            guard case .stream(let type, let headers, let produce) = reply else { return reply }
            return .stream(contentType: type, headers: headers) { writer in
                defer { slot.close() }
                try await produce(writer)
            }
        }
        let path = "/v1/" + request.segments.joined(separator: "/")
        if pathMatched {
            let allowed = Self.routes.filter { Self.match($0.pattern, request.segments) != nil }.map
            { "\($0.method)" }
            throw AppdError(
                .methodNotAllowed,
                "\(request.method) is not allowed on \(path.prefix(200)); use \(allowed.joined(separator: " or "))"
            )
        }
        throw AppdError(
            .notFound, "no route \(path.prefix(200))", hint: "docs/api.md lists the routes")
    }

    /// Requests that may hold their connection indefinitely: `MaxStreamsPerUser` bounds them.
    static func isLongLived(_ route: Route, _ request: Request) -> Bool {
        switch route.pattern {
        // A restart waits for the old instance's end, up to its grace period.
        case ["events"], ["instances", "{iid}", "wait"], ["instances", "{iid}", "restart"]: true
        case ["instances", "{iid}", "logs"], ["denials"]: request.flag("follow")
        // Counted before the launch: a caller at its limit is refused with nothing launched.
        case ["apps", "{id}", "launch"]: request.flag("attach")
        // As long as the data takes to read and the client to take it.
        case ["apps", "{id}", "backup"]: true
        default: false
        }
    }

    static func match(_ pattern: [String], _ segments: [String]) -> [String]? {
        guard pattern.count == segments.count else { return nil }
        var parameters: [String] = []
        for (want, have) in zip(pattern, segments) {
            if want.hasPrefix("{") {
                parameters.append(have)
            } else if want != have {
                return nil
            }
        }
        return parameters
    }

    func version(_ request: Request) throws -> Reply {
        try .json(
            APIDaemonInfo(
                version: AppdVersion.current, pid: getpid(), stateRoot: store.root.path,
                startedAt: startedAt,
                caller: APICaller(
                    uid: request.caller.uid, gid: request.caller.gid, pid: request.caller.pid,
                    rights: authorizer.rights(of: request.caller).map(\.rawValue)),
                configFile: reloader.source.path,
                configFileExists: access(reloader.source.path, F_OK) == 0))
    }
}
