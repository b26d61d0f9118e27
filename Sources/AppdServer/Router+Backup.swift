import AppBundle
import AppContainers
import AppdAPI
import AppdBase
import BundleArchive
import Dispatch
import Foundation
import Glibc
import Supervisor

/// `POST /v1/apps/{id}/backup` and `POST /v1/apps/{id}/restore` (docs/backup.md). The daemon
/// does both: it runs as root and owns the containers, and the admin asking may not read them.
/// The file work runs on a queue of its own, never on the event loop or the cooperative pool.
extension Router {
    static let backupQueue = DispatchQueue(label: "appd.backup", attributes: .concurrent)

    /// Streams the backup as the answer. Unless `live=1`, the app's running instances are frozen
    /// first and thawed once the data is read, also when the client goes away mid-way. With
    /// `groups=1` the containers of the app's groups come too (first), and the instances of
    /// every app sharing them are frozen with its own, each app thawed as soon as the groups it
    /// shares are read. A backup larger than its cap (AppStore.backupCap) is refused before it
    /// starts, by what the containers use; the writer holds the stream to the cap as well.
    func backup(_ id: String, _ request: Request) async throws -> Reply {
        let app = try store.app(id)
        let live = request.flag("live")
        let groups = request.flag("groups") ? try store.groupContainers(for: app) : []
        let users = try store.groupUsers(of: groups, besides: app)
        let store = store
        let cap = store.backupCap(for: app, groups: groups)
        let usage = try await Self.onBackupQueue { store.backupUsage(of: app, groups: groups) }
        guard usage.bytes <= cap.bytes else {
            throw AppdError(
                .tooLarge,
                "a backup of \(app.bundleID) would hold \(usage.bytes) bytes (what its Documents and Library\(groups.isEmpty ? "" : " and its group containers") use: holes not counted, a file with several names once), over its cap of \(cap.bytes) bytes (\(cap.source))",
                hint:
                    "raise [Storage] BackupMaxBytes= in appd.conf (appd.conf(5)), or remove data of the app first"
            )
        }
        let limits = {
            var limits = BackupLimits()
            limits.maxBytes = cap.bytes
            limits.capSource = cap.source
            return limits
        }()
        let manifest = BackupManifest(
            bundleID: app.bundleID, version: app.version, signer: app.signerKeyID,
            createdAt: UTCTime(secondsSince1970: Int64(time(nil))).text() + "Z", live: live,
            groups: groups.isEmpty ? nil : groups.map(\.groupID))
        let groupPaths = groups.map { (id: $0.groupID, path: $0.path) }
        let container = app.dataContainer(in: store.root)
        let supervisor = supervisor
        let logger = installer.logger
        return .stream(contentType: "application/x-tar") { writer in
            let holds = BackupHolds(users: users)
            do {
                if !live {
                    for bundleID in [app.bundleID] + users.keys.sorted() {
                        holds.held(
                            bundleID, try await supervisor.freezeForBackup([AppID(bundleID)]))
                    }
                }
            } catch {
                await supervisor.thawAfterBackup(holds.takeAll())
                // The answer has begun: the client sees it cut short, the log says why.
                logger.warning(
                    "backup of \(app.bundleID) not taken: \(error)",
                    metadata: ["app": "\(app.bundleID)"])
                throw error
            }
            let frozen = holds.all
            let heldSince = ContinuousClock.now
            @Sendable func thaw() async -> Double {
                await supervisor.thawAfterBackup(holds.takeAll())
                return (ContinuousClock.now - heldSince).seconds
            }
            /// Runs `body` from the backup queue and waits for it; what it returns.
            @Sendable func waiting(_ body: @escaping @Sendable () async -> Double) -> Double {
                let semaphore = DispatchSemaphore(value: 0)
                let result = Box<Double>(0)
                Task {
                    result.value = await body()
                    semaphore.signal()
                }
                semaphore.wait()
                return result.value
            }
            do {
                let pipe = ChunkPipe()
                let summary = try await withThrowingTaskGroup(of: BackupSummary?.self) { group in
                    group.addTask {
                        try await Self.onBackupQueue {
                            var backup = BackupWriter(manifest: manifest, limits: limits) {
                                try pipe.put($0)
                            }
                            defer { pipe.close() }
                            return try backup.write(
                                container: container, groups: groupPaths,
                                groupRead: { id in
                                    // The apps that share only groups read by now run again.
                                    let ids = holds.groupRead(id)
                                    if !ids.isEmpty {
                                        _ = waiting {
                                            await supervisor.thawAfterBackup(ids)
                                            return 0
                                        }
                                    }
                                }
                            ) {
                                // The data and its listing are out: the app may run again.
                                let seconds = waiting { await thaw() }
                                return (frozen.isEmpty ? nil : seconds, frozen)
                            }
                        }
                    }
                    group.addTask {
                        do {
                            while let chunk = try await pipe.take() {
                                try await writer.write(chunk)
                            }
                        } catch {
                            pipe.fail(error)
                            throw error
                        }
                        return nil
                    }
                    var summary: BackupSummary?
                    for try await result in group where result != nil { summary = result }
                    return summary
                }
                if let summary {
                    logger.info(
                        "backup of \(app.bundleID): \(summary.files) files, \(summary.bytes) bytes, \(summary.storedBytes ?? 0) bytes stored, \(summary.skippedCount) skipped, held \(summary.heldSeconds.map { "\($0) s" } ?? "not at all")",
                        metadata: ["app": "\(app.bundleID)"])
                }
            } catch {
                _ = await thaw()
                logger.warning(
                    "backup of \(app.bundleID) failed: \(error)",
                    metadata: ["app": "\(app.bundleID)"])
                throw error
            }
        }
    }

    /// Restores the backup in the request body into the installed app: refused while an
    /// instance runs (and no launch starts meanwhile), its signer must be the backup's unless
    /// `allowSignerChange=1`. The new container is built beside the old and swapped in one
    /// rename once every check passed; any failure removes it and leaves the old data as it was.
    /// With `groups=1` the backup's group containers are restored too, each swapped in the same
    /// way before the data container (and swapped back should that fail), and no app sharing
    /// the app's groups may run; without it they are left as they are, and the answer names
    /// them.
    func restore(_ id: String, _ request: Request) async throws -> Reply {
        let type = request.headers.first(name: "Content-Type")?.lowercased() ?? ""
        guard type.hasPrefix("application/x-tar") else {
            throw AppdError(
                .unsupportedMediaType,
                "a restore takes Content-Type application/x-tar, not '\(type.prefix(100))'")
        }
        let app = try store.app(id)
        let allowSignerChange = request.flag("allowSignerChange")
        let restoreGroups = request.flag("groups")
        let groups = restoreGroups ? try store.groupContainers(for: app) : []
        let closed = [app.appID] + (try store.appsSharing(groups)).map { AppID($0) }
        let store = store
        // Read by this request alone, in order, inside the closure below.
        let body = UncheckedBody(request.body)
        let began = ContinuousClock.now
        let phases = Box<[String]>([])
        let result = try await supervisor.whileNotRunning(closed) {
            let target = try await Self.onBackupQueue { try store.restoredContainer(for: app) }
            let limits = BackupLimits().extractionLimits(maxTotalBytes: target.byteLimit)
            let rules = ExtractionRules(
                owner: (app.uid, app.gid), allowsAbsoluteLinks: true, allowsSparseFiles: true,
                hardLinks: { BackupFormat.mayShareFile($0, $1) })
            do {
                let extractor = try await Self.onBackupQueue {
                    try ExtractorBox(into: target.path, limits: limits, rules: rules)
                }
                while let chunk = try await body.body.next() {
                    try await Self.onBackupQueue { try extractor.consume(chunk) }
                }
                return try await Self.onBackupQueue {
                    try extractor.finish()
                    let extracted = ContinuousClock.now
                    let manifest = try BackupCheck.verify(
                        extractedAt: target.path, digests: extractor.digests)
                    try Self.check(manifest, against: app, allowSignerChange: allowSignerChange)
                    let inBackup = manifest.groups ?? []
                    var restored: [RestoredGroup] = []
                    if restoreGroups {
                        for id in inBackup {
                            guard
                                let group = groups.first(where: {
                                    $0.groupID.lowercased() == id.lowercased()
                                })
                            else {
                                throw AppdError(
                                    .conflict,
                                    "the backup holds the container of the application group \(BackupFormat.shown(id)), which \(app.bundleID) does not use on this host (no such entitlement, or the group belongs to another signer)",
                                    hint:
                                        "restore it without --groups to leave the groups as they are"
                                )
                            }
                            restored.append(
                                try store.restoredGroup(
                                    group, from: id,
                                    in: "\(target.path)/\(BackupFormat.groupsFolder)",
                                    owner: app.uid))
                        }
                    }
                    try target.removeExtracted(BackupFormat.groupsFolder)
                    let checked = ContinuousClock.now
                    do {
                        for group in restored { try group.commit() }
                        try target.commit()
                    } catch {
                        for group in restored { group.rollBack() }
                        throw error
                    }
                    // The answer need not wait for the old data to go (the lock is held until
                    // it has).
                    Self.backupQueue.async { target.removeReplaced() }
                    phases.value = [
                        "received and extracted in \((extracted - began).seconds) s",
                        "checked in \((checked - extracted).seconds) s",
                        "synced and swapped in \((ContinuousClock.now - checked).seconds) s",
                    ]
                    return APIRestoreResult(
                        bundleId: app.bundleID, backupVersion: manifest.version,
                        backupCreatedAt: manifest.createdAt, backupSigner: manifest.signer,
                        files: extractor.progress.files, bytes: extractor.progress.bytes,
                        dataContainer: app.dataContainer(in: store.root),
                        groups: restored.isEmpty ? nil : restored.map(\.group.groupID),
                        groupsNotRestored: restoreGroups || inBackup.isEmpty ? nil : inBackup)
                }
            } catch {
                // Gone before the answer, not whenever this value is released.
                _ = try? await Self.onBackupQueue { target.discard() }
                throw error
            }
        }
        installer.logger.info(
            "restored \(result.bundleId) from a backup of \(result.backupCreatedAt): \(result.files) files, \(result.bytes) bytes; \(phases.value.joined(separator: ", "))",
            metadata: ["app": "\(app.bundleID)"])
        return try .json(result)
    }

    static func check(
        _ manifest: BackupManifest, against app: InstalledApp, allowSignerChange: Bool
    )
        throws
    {
        guard AppID(manifest.bundleID) == app.appID else {
            throw AppdError.backup(
                "it is a backup of \(BackupFormat.shown(manifest.bundleID)), not of \(app.bundleID)"
            )
        }
        guard allowSignerChange || manifest.signer == app.signerKeyID else {
            throw AppdError(
                .permissionDenied,
                "the backup was taken from \(app.bundleID) signed by \(manifest.signer.map(BackupFormat.shown) ?? "no one (unsigned)"); the installed app is signed by \(app.signerKeyID ?? "no one (unsigned)")",
                hint: "restore across signers only on purpose: appd restore --allow-signer-change")
        }
    }

    static func onBackupQueue<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws
        -> T
    {
        try await withCheckedThrowingContinuation { continuation in
            backupQueue.async { continuation.resume(with: Result { try body() }) }
        }
    }
}

/// Hands the writer's 64 KiB pieces from the backup queue to the answer, one at a time: the
/// queue waits while the client reads (backpressure), and a client gone makes `put` throw.
final class ChunkPipe: @unchecked Sendable {
    private let lock = NSCondition()
    private var chunk: [UInt8]?
    private var closed = false
    private var failure: (any Error)?
    private var waiting: CheckedContinuation<[UInt8]?, any Error>?

    func put(_ bytes: UnsafeRawBufferPointer) throws {
        lock.lock()
        defer { lock.unlock() }
        while chunk != nil && failure == nil { lock.wait() }
        if let failure { throw failure }
        if let waiting {
            self.waiting = nil
            waiting.resume(returning: Array(bytes))
        } else {
            chunk = Array(bytes)
        }
    }

    func close() {
        lock.lock()
        defer { lock.unlock() }
        closed = true
        if let waiting, chunk == nil {
            self.waiting = nil
            waiting.resume(returning: nil)
        }
    }

    func fail(_ error: any Error) {
        lock.lock()
        defer { lock.unlock() }
        failure = error
        lock.broadcast()
    }

    func take() async throws -> [UInt8]? {
        try await withCheckedThrowingContinuation { continuation in
            lock.lock()
            defer { lock.unlock() }
            if let chunk {
                self.chunk = nil
                lock.broadcast()
                continuation.resume(returning: chunk)
            } else if closed {
                continuation.resume(returning: nil)
            } else {
                waiting = continuation
            }
        }
    }
}

/// The instances a backup froze, by app, and the groups each other app still waits for:
/// each is taken (to be thawed) once, by `groupRead` when its last group is read or by
/// `takeAll` at the end.
final class BackupHolds: @unchecked Sendable {
    private let lock = NSLock()
    private var instances: [String: [String]] = [:]
    private var waiting: [String: Set<String>]
    private(set) var all: [String] = []

    init(users: [String: Set<String>]) { waiting = users }

    func held(_ app: String, _ ids: [String]) {
        lock.lock()
        defer { lock.unlock() }
        instances[app] = ids
        all = (all + ids).sorted()
    }

    /// The instances of the apps whose last group `id` was.
    func groupRead(_ id: String) -> [String] {
        lock.lock()
        defer { lock.unlock() }
        var ready: [String] = []
        for (app, groups) in waiting {
            let left = groups.filter { $0.lowercased() != id.lowercased() }
            waiting[app] = left
            if left.isEmpty, let ids = instances.removeValue(forKey: app) { ready += ids }
        }
        return ready
    }

    func takeAll() -> [String] {
        lock.lock()
        defer { lock.unlock() }
        defer { instances = [:] }
        return instances.values.flatMap { $0 }
    }
}

struct UncheckedBody: @unchecked Sendable {
    let body: RequestBody
    init(_ body: RequestBody) { self.body = body }
}

final class Box<T>: @unchecked Sendable {
    var value: T
    init(_ value: T) { self.value = value }
}

extension Duration {
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
