import AppContainers
import AppdBase
import AppdConfig
import Foundation
import Testing

@testable import AppContainers
@testable import Supervisor

/// The cache reclaimer's decisions (CacheReclaimer), without an actor or a filesystem.
@Suite("the cache reclaimer's order and stops")
struct CacheReclaimerTests {
    static func app(_ id: String, state: InstalledApp.State = .installed) -> InstalledApp {
        let date = Date(timeIntervalSince1970: 0)
        return InstalledApp(
            bundleID: id, state: state, uid: 60_001, dataUUID: "d", bundleUUID: "b",
            bundleName: "\(id).app", title: id, version: "1", installedAt: date, updatedAt: date)
    }

    @Test(
        "least recently launched first, never launched first of all, then by id; installed apps only"
    )
    func order() {
        let day = Date(timeIntervalSince1970: 86_400)
        let apps = [
            Self.app("com.example.recent"), Self.app("com.example.old"),
            Self.app("com.example.never.b"), Self.app("com.example.never.a"),
            Self.app("com.example.kept", state: .dataKept),
        ]
        let launched: [AppID: Date] = [
            "COM.example.recent": day.addingTimeInterval(3600), "com.example.old": day,
        ]
        #expect(
            CacheReclaimer.order(apps, lastLaunched: launched).map(\.bundleID) == [
                "com.example.never.a", "com.example.never.b", "com.example.old",
                "com.example.recent",
            ])
    }

    @Test("the policy runs below the level and stops above it; by hand it always runs")
    func stops() throws {
        let level = try #require(StorageSettings.Level("10%"))
        let low = FreeSpace(availableBytes: 5, totalBytes: 100)
        let high = FreeSpace(availableBytes: 10, totalBytes: 100)
        let policy = CacheReclaimer(level: level, byHand: false)
        #expect(!policy.satisfied(low))
        #expect(policy.satisfied(high))
        #expect(!policy.satisfied(nil))
        #expect(policy.done(high) && !policy.done(low))
        #expect(policy.why == "free space below [Storage] ReclaimCachesBelow=10%")
        let byHand = CacheReclaimer(level: level, byHand: true)
        #expect(!byHand.satisfied(high))
        #expect(byHand.done(high))
        #expect(byHand.why == "by appd reclaim-caches")
        let noLevel = CacheReclaimer(level: nil, byHand: true)
        #expect(!noLevel.satisfied(high) && !noLevel.done(high))
    }
}
