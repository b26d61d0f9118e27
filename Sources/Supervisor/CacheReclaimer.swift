import AppContainers
import AppdBase
import AppdConfig
import Foundation

/// The cache reclaimer's decisions (docs/api.md, "Storage"; Supervisor+Caches.swift acts on them):
/// whose `Library/Caches` a run empties, in which order, when it stops, and the words each event
/// gives as the reason. By the policy, a run happens below `[Storage] ReclaimCachesBelow` and
/// stops once the filesystem is above it again; by hand (`appd reclaim-caches`) it empties every
/// app not running, or the one named. Apps with an instance running are never emptied: the actor
/// checks that at each step, as it empties.
struct CacheReclaimer {
    /// `[Storage] ReclaimCachesBelow`, if set.
    let level: StorageSettings.Level?
    /// `appd reclaim-caches`, not the policy.
    let byHand: Bool

    /// Why the Caches are emptied, as each event says it.
    var why: String {
        byHand
            ? "by appd reclaim-caches"
            : "free space below [Storage] ReclaimCachesBelow=\(level?.description ?? "")"
    }

    /// A policy run has nothing to do: the filesystem is above the level (or cannot be
    /// measured). A run by hand always runs.
    func satisfied(_ space: FreeSpace?) -> Bool { !byHand && done(space) }

    /// Whether a run over every app stops before the next one: the policy's, once the
    /// filesystem is above the level again.
    func done(_ space: FreeSpace?) -> Bool {
        guard let level, let space else { return false }
        return level.isAbove(space)
    }

    /// The installed apps in the order their Caches go: least recently launched first, never
    /// launched first of all, then by id.
    static func order(_ apps: [InstalledApp], lastLaunched: [AppID: Date]) -> [InstalledApp] {
        apps.filter { $0.state == .installed }.sorted {
            let (a, b) = (lastLaunched[$0.appID], lastLaunched[$1.appID])
            return (a ?? .distantPast, $0.bundleID) < (b ?? .distantPast, $1.bundleID)
        }
    }
}
