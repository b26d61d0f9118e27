import AppdBase
import AppdConfig
import Foundation
import Glibc

/// `Library/Caches` is reclaimable (docs/threat-model.md, "The data container"): iOS may empty
/// it whenever the app is not running and space is short, and appd does below `[Storage]
/// ReclaimCachesBelow` or by hand (`appd reclaim-caches`). The tree is the app's, emptied as
/// root with the remover tmp uses (AppStore+Temporary.swift: no link followed, no mount
/// crossed, iterative); what the Supervisor decides is which app and when (never a running one).
extension AppStore {
    /// What emptying one app's Caches freed.
    public struct CachesReclaimed: Sendable {
        public var bundleID: String
        /// Allocated bytes the walk counted before the emptying (a lower bound when the walk
        /// stopped at its bounds).
        public var bytes: Int64
        /// Entries at the top of Caches that were removed.
        public var entries: Int
    }

    /// Empties the app's `Library/Caches` (not the folder itself). Call only while no instance
    /// of the app runs.
    public func emptyCaches(of app: InstalledApp) throws -> CachesReclaimed {
        var walk = StorageWalk(limits: .standard)
        let bytes = walk.measure(app.dataContainer(in: root), start: "Library/Caches")
        let entries = try emptyDataFolder(of: app, ["Library", "Caches"])
        return CachesReclaimed(
            bundleID: app.bundleID, bytes: entries == 0 ? 0 : bytes, entries: entries)
    }

    /// Records a launch of the app now (what "least recently launched" goes by).
    public func recordLaunch(of bundleID: String, at time: Date = Date()) throws {
        try registry?.recordLaunch(bundleID, at: time)
    }

    /// Each app's last launch; apps never launched are absent.
    public func lastLaunches() throws -> [AppID: Date] {
        try registry?.lastLaunches() ?? [:]
    }

    /// The state root's filesystem's free space now (one statvfs).
    public func freeSpace() -> FreeSpace? { FreeSpace.of(root.path) }
}
