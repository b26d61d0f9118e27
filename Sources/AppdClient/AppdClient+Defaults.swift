import AppdAPI
import AppdBase

/// The preferences routes of docs/api.md ("Preferences"): an app's own domain.
extension AppdClient {
    /// `GET /v1/apps/{id}/defaults`
    public func defaults(_ id: String) throws(AppdError) -> APIDefaults {
        try get(Self.path("apps", id, "defaults"))
    }

    /// `POST /v1/apps/{id}/defaults`
    public func changeDefaults(_ id: String, _ change: APIDefaultsChange) throws(AppdError)
        -> APIDefaultsResult
    {
        try post(Self.path("apps", id, "defaults"), body: change)
    }
}
