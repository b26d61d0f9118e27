import AppContainers
import AppdAPI
import AppdBase
import Foundation
import Synchronization

/// `Library/Caches` is reclaimable: below `[Storage] ReclaimCachesBelow` (checked with one
/// statvfs after every install and launch and once a minute) appd empties the Caches of apps
/// with no instance running and none launching, least recently launched first (never launched
/// first of all), until the state root's filesystem is above the level again; `appd
/// reclaim-caches [ID]` does it by hand. An emptying is registered where tmp's are
/// (`emptyingTemporary`), so a launch or an uninstall of that app waits for it; the tree is
/// removed off the actor by the remover tmp uses (AppStore+Caches.swift). Each reclaim is an
/// event, a log line (`CacheReclaims.onReclaim`, the daemon's journal) and the metrics
/// `appd_cache_reclaims_total` and `appd_cache_reclaimed_bytes_total`.
extension Supervisor {
    /// A run of the policy when the filesystem is below the level and none is under way; for
    /// after an install or a launch and the periodic check. Costs one statvfs otherwise.
    public nonisolated func reclaimCachesIfLow() {
        guard let level = configuration.current.storage.reclaimCachesBelow,
            let space = catalog.freeSpace(), !level.isAbove(space)
        else { return }
        Task { _ = try? await self.reclaimCaches(app: nil, byHand: false) }
    }

    /// Empties Caches: of `app` alone (refused while it runs), or by the policy (below the
    /// level, least recently launched first, until above it; by hand without a level set, of
    /// every app not running). One run at a time: a second waits for the first.
    public func reclaimCaches(app appID: AppID?, byHand: Bool) async throws -> APICachesReclaim {
        let previous = reclaimRun
        let run = Task { () async throws -> APICachesReclaim in
            await previous?.value
            return try await self.reclaimCachesNow(app: appID, byHand: byHand)
        }
        let tail = Task<Void, Never> { _ = await run.result }
        reclaimRun = tail
        defer { if reclaimRun == tail { reclaimRun = nil } }
        return try await run.value
    }

    private func reclaimCachesNow(app appID: AppID?, byHand: Bool) async throws
        -> APICachesReclaim
    {
        let level = configuration.current.storage.reclaimCachesBelow
        let reclaimer = CacheReclaimer(level: level, byHand: byHand)
        let before = catalog.freeSpace()
        var answer = APICachesReclaim(
            level: level?.description, freeBytesBefore: before?.availableBytes,
            totalBytes: before?.totalBytes)
        let launches = (try? catalog.lastLaunches()) ?? [:]
        let candidates: [InstalledApp]
        if let appID {
            let app = try catalog.app(appID.spelling)
            guard !appIsRunning(app.appID) else {
                throw AppdError(
                    .conflict,
                    "\(app.bundleID) has an instance running: appd never empties a running app's Caches",
                    hint: "terminate it first ('appctl terminate \(app.bundleID)')")
            }
            candidates = [app]
        } else {
            if reclaimer.satisfied(before) { return answer }
            candidates = CacheReclaimer.order(try catalog.apps(), lastLaunched: launches)
        }
        let why = reclaimer.why
        for app in candidates {
            if appID == nil, reclaimer.done(catalog.freeSpace()) { break }
            let key = app.appID
            guard !appIsRunning(key) else {
                answer.running.append(app.bundleID)
                continue
            }
            let emptied: AppStore.CachesReclaimed
            do {
                emptied = try await emptyCachesOffActor(app, key: key)
            } catch {
                Self.reportReclaim(
                    hub, cacheReclaims, app.bundleID, bytes: nil,
                    "Library/Caches not emptied (\(why)): \(error)")
                continue
            }
            guard emptied.entries > 0 else { continue }
            answer.reclaimed.append(
                APICachesReclaimed(
                    app: app.bundleID, bytes: emptied.bytes, entries: emptied.entries,
                    lastLaunched: launches[key]))
            Self.reportReclaim(
                hub, cacheReclaims, app.bundleID, bytes: emptied.bytes,
                "Library/Caches emptied (\(why)): \(TextFormatting.byteCount(emptied.bytes)) freed, \(emptied.entries) entr\(emptied.entries == 1 ? "y" : "ies") removed"
            )
        }
        answer.freeBytesAfter = catalog.freeSpace()?.availableBytes
        return answer
    }

    /// Empties the app's Caches on a task of its own, registered as an emptying of the app so
    /// that its launches wait; the caller has checked that no instance runs or launches, and
    /// nothing suspends between that check and the registration.
    private func emptyCachesOffActor(_ app: InstalledApp, key: AppID) async throws
        -> AppStore.CachesReclaimed
    {
        let previous = emptyingTemporary[key]
        let catalog = catalog
        let work = Task.detached {
            await previous?.value
            return try catalog.emptyCaches(of: app)
        }
        let waited = Task<Void, Never> { _ = await work.result }
        emptyingTemporary[key] = waited
        defer { if emptyingTemporary[key] == waited { emptyingTemporary[key] = nil } }
        return try await work.value
    }

    private nonisolated static func reportReclaim(
        _ hub: EventHub, _ reclaims: CacheReclaims, _ appID: String, bytes: Int64?,
        _ detail: String
    ) {
        if let bytes { reclaims.record(AppID(appID), bytes: bytes) }
        reclaims.log(appID, detail)
        hub.publish { seq in
            APIEvent(seq: seq, time: Date(), kind: .message, app: appID, detail: detail)
        }
    }
}

/// What reclaiming Caches did since the daemon started, per app (the metrics), and where its
/// log lines go (the daemon sets that: its journal).
public final class CacheReclaims: Sendable {
    public struct Count: Sendable, Equatable {
        public var reclaims = 0
        public var bytes: Int64 = 0
    }

    private let counts = Mutex<[AppID: Count]>([:])
    private let observer = Mutex<(@Sendable (String, String) -> Void)?>(nil)

    init() {}

    /// `body(app, line)` for each reclaim and each failed one.
    public func onReclaim(_ body: @escaping @Sendable (String, String) -> Void) {
        observer.withLock { $0 = body }
    }

    /// App → reclaims and bytes freed since the daemon started.
    public func perApp() -> [AppID: Count] { counts.withLock { $0 } }

    func record(_ app: AppID, bytes: Int64) {
        counts.withLock {
            $0[app, default: Count()].reclaims += 1
            $0[app, default: Count()].bytes =
                $0[app, default: Count()].bytes
                .addingReportingOverflow(max(0, bytes)).partialValue
        }
    }

    func log(_ app: String, _ line: String) {
        observer.withLock { $0 }?(app, line)
    }
}

extension Supervisor {
    /// After a launch, off its path: the registry notes the launch (what "least recently
    /// launched" goes by), then the free space is checked.
    nonisolated func launchRecorded(_ appID: AppID) {
        let (catalog, time) = (catalog, Date())
        Task.detached {
            try? catalog.recordLaunch(of: appID.spelling, at: time)
            self.reclaimCachesIfLow()
        }
    }
}
