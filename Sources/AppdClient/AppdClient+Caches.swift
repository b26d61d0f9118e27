import AppdAPI
import AppdBase

extension AppdClient {
    /// `POST /v1/reclaim-caches` (`app=ID`: that app's only): empties `Library/Caches` of apps
    /// not running, least recently launched first (docs/api.md, "Reclaiming Caches").
    public func reclaimCaches(app: String? = nil) throws(AppdError) -> APICachesReclaim {
        try post(Self.path("reclaim-caches", query: ["app": app]))
    }
}
