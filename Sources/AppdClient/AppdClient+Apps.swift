import AppdAPI
import AppdBase

/// The app routes of docs/api.md ("Routes"), one typed method each: the path, the verb and the
/// answer's type are spelled here once, not at each call site.
extension AppdClient {
    /// `GET /v1/apps`: every installed app (without entitlements).
    public func apps() throws(AppdError) -> [APIApp] {
        try get(Self.path("apps"))
    }

    /// `POST /v1/apps`: the bundle named `name` (`Hello.app`), as the tar stream `body` writes,
    /// installed by the daemon (docs/api.md, "Installing through the daemon").
    public func install(
        name: String, allowDowngrade: Bool = false, allowSignerChange: Bool = false,
        body produce: BodyProducer
    ) throws -> APIInstallResult {
        try upload(
            Self.path(
                "apps",
                query: [
                    "name": name, "allowDowngrade": allowDowngrade ? "1" : nil,
                    "allowSignerChange": allowSignerChange ? "1" : nil,
                ]),
            contentType: "application/x-tar", body: produce)
    }

    /// `GET /v1/apps/{id}`: one app with its entitlements, override and service.
    public func app(_ id: String) throws(AppdError) -> APIApp {
        try get(Self.path("apps", id))
    }

    /// `DELETE /v1/apps/{id}` (`keepData=1` keeps its data container and uid).
    public func uninstall(_ id: String, keepData: Bool = false) throws(AppdError)
        -> APIUninstallResult
    {
        try delete(Self.path("apps", id, query: ["keepData": keepData ? "1" : nil]))
    }

    /// `GET /v1/apps/{id}/containers/{kind}` (`data` or `bundle`).
    public func container(_ id: String, kind: String) throws(AppdError) -> APIContainer {
        try get(Self.path("apps", id, "containers", kind))
    }

    /// `GET /v1/apps/{id}/containers/group/{group}`: the app's application-group container.
    public func groupContainer(_ id: String, group: String) throws(AppdError) -> APIContainer {
        try get(Self.path("apps", id, "containers", "group", group))
    }

    /// `POST /v1/apps/{id}/launch`: the new instance (`launchAttached` follows it as well).
    public func launch(_ id: String, _ request: LaunchRequest = LaunchRequest()) throws(AppdError)
        -> APIInstance
    {
        try post(Self.path("apps", id, "launch"), body: request)
    }

    /// `POST /v1/open`: the URL opened by the app that claims it (`appctl open`).
    public func open(_ request: OpenRequest) throws(AppdError) -> APIOpenResult {
        try post(Self.path("open"), body: request)
    }
}
