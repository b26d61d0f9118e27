#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `POST /v1/reclaim-caches` (`appd reclaim-caches [ID]`): which apps' `Library/Caches` were
/// emptied and what that freed.
public struct APICachesReclaim: Codable, Sendable, Equatable {
    /// `[Storage] ReclaimCachesBelow` in force (`10%`, or bytes), if set.
    public var level: String?
    /// The state root's filesystem before and after (statvfs: what a user may still write).
    public var freeBytesBefore: Int64?
    public var freeBytesAfter: Int64?
    public var totalBytes: Int64?
    /// In the order they were emptied: least recently launched first.
    public var reclaimed: [APICachesReclaimed]
    /// Apps left alone because an instance of theirs runs.
    public var running: [String]

    public init(
        level: String? = nil, freeBytesBefore: Int64? = nil, freeBytesAfter: Int64? = nil,
        totalBytes: Int64? = nil, reclaimed: [APICachesReclaimed] = [], running: [String] = []
    ) {
        self.level = level
        self.freeBytesBefore = freeBytesBefore
        self.freeBytesAfter = freeBytesAfter
        self.totalBytes = totalBytes
        self.reclaimed = reclaimed
        self.running = running
    }
}

public struct APICachesReclaimed: Codable, Sendable, Equatable {
    public var app: String
    /// Allocated bytes the Caches held (a lower bound for a tree past the walk's bounds).
    public var bytes: Int64
    /// Entries removed from the top of Caches.
    public var entries: Int
    /// When the app was last launched; absent if never (since appd recorded launches).
    public var lastLaunched: Date?

    public init(app: String, bytes: Int64, entries: Int, lastLaunched: Date? = nil) {
        self.app = app
        self.bytes = bytes
        self.entries = entries
        self.lastLaunched = lastLaunched
    }
}
