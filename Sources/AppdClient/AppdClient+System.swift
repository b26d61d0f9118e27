import AppdAPI
import AppdBase

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The daemon-wide routes of docs/api.md ("Routes"): version, services, usage, memory
/// warnings, reload, the event and denial streams.
extension AppdClient {
    /// `GET /v1/version`: the daemon, its state root and the caller's rights.
    public func version() throws(AppdError) -> APIDaemonInfo {
        try get(Self.path("version"))
    }

    /// `GET /v1/services`: every app set to run at load or kept alive.
    public func services() throws(AppdError) -> [APIService] {
        try get(Self.path("services"))
    }

    /// `GET /v1/usage`: each live instance's cgroup now (of one app with `app`).
    public func usage(app: String? = nil) throws(AppdError) -> APIUsage {
        try get(Self.path("usage", query: ["app": app]))
    }

    /// `POST /v1/memory-warning`: didReceiveMemoryWarning to the app's instances that are not
    /// frozen (to every app's without `app`).
    public func memoryWarning(app: String?) throws(AppdError) -> APIMemoryWarning {
        try post(Self.path("memory-warning", query: ["app": app]))
    }

    /// `POST /v1/reload`: appd.conf read again and put in force.
    public func reload() throws(AppdError) -> APIReloadResult {
        try post(Self.path("reload"))
    }

    /// `GET /v1/events` (`since` a seq or an RFC 3339 time): each NDJSON line to `onLine`, until
    /// the daemon ends the stream or `onLine` throws.
    public func events(since: String? = nil, onLine: (Data) throws -> Void) throws {
        try streamLines(Self.path("events", query: ["since": since]), onLine: onLine)
    }

    /// Which denials `GET /v1/denials` returns: every app's, one app's or one instance's.
    public enum DenialScope: Sendable, Equatable {
        case all
        case app(String)
        case instance(String)
    }

    /// `GET /v1/denials`: the kept denials.
    public func denials(_ scope: DenialScope = .all) throws(AppdError) -> APIDenials {
        try get(Self.denialsPath(scope, follow: false))
    }

    /// `GET /v1/denials?follow=1`: the kept denials, then each new one, one NDJSON line each.
    public func followDenials(_ scope: DenialScope = .all, onLine: (Data) throws -> Void) throws {
        try streamLines(Self.denialsPath(scope, follow: true), onLine: onLine)
    }

    static func denialsPath(_ scope: DenialScope, follow: Bool) -> String {
        let follow: String? = follow ? "1" : nil
        return switch scope {
        case .all: path("denials", query: ["follow": follow])
        case .app(let id): path("denials", query: ["app": id, "follow": follow])
        case .instance(let id): path("denials", query: ["instance": id, "follow": follow])
        }
    }
}
