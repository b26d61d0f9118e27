import AppdBase
import CLinux
import Foundation
import Glibc

/// A data container being restored: `Containers/Data/<uuid>`, beside the app's container (the
/// same filesystem, so the swap is one rename), root-only until it is whole. Under the app's
/// quota from the start (the project and its inherit flag are set before anything is written),
/// so what a backup brings counts against it. Removed with this value unless it was swapped in;
/// once swapped, the old data is what is removed.
///
/// It holds the state lock from its making to its end, as an install does: the recovery that
/// another change runs first must not take this half-made container for an orphan. A crash
/// leaves the mutation mark, so the next change's recovery removes whichever container the
/// registry does not name (the new one before the swap, the old one after it).
public final class RestoredContainer: @unchecked Sendable {
    public let app: InstalledApp
    /// Where the extractor writes.
    public let path: String
    let name: String
    let store: AppStore
    private let lock: StateLock
    private var committed = false
    private var discarded = false

    init(store: AppStore, app: InstalledApp) throws {
        self.store = store
        self.app = app
        (lock, _) = try store.lockAndRecover(onWait: {})
        name = UUID().uuidString
        let parent = try FileDescriptor.directory(store.root.dataContainersPath)
        path = parent.child(name)
        // Root's and closed to everyone until it is swapped in: the app (and its uid on another
        // host's backup) gets its entries from the extractor.
        let dir: FileDescriptor
        do {
            dir = try parent.makeDirectory(name, mode: 0o700)
        } catch {
            store.mutationFinished()
            throw error
        }
        do {
            try store.applyDataQuota(dir, uid: app.uid, bundleID: app.bundleID, path: path)
        } catch {
            if (try? parent.removeTree(name)) != nil { store.mutationFinished() }
            throw error
        }
    }

    deinit { discard() }

    /// Removes the half-made container unless it was swapped in. A failed restore calls it
    /// before it answers, so that the client, told of the failure, finds nothing left.
    public func discard() {
        guard !committed, !discarded else { return }
        discarded = true
        // The mark stays (for the next recovery) unless the half-made container is gone.
        if let parent = try? FileDescriptor.directory(store.root.dataContainersPath),
            (try? parent.removeTree(name)) != nil
        {
            store.mutationFinished()
        }
    }

    /// The most the restore may write: the app's data quota when one is set, else what is free
    /// on the filesystem.
    public var byteLimit: Int64 {
        if let quota = store.config.dataQuota(for: app.bundleID) { return quota }
        var fs = statvfs()
        guard statvfs(store.root.dataContainersPath, &fs) == 0 else { return 0 }
        let (bytes, over) = Int64(clamping: fs.f_bavail).multipliedReportingOverflow(
            by: Int64(clamping: fs.f_frsize))
        return over ? .max : bytes
    }

    /// Makes the standard folders the backup did not carry (`Library/Caches`, `tmp`) and puts
    /// owner and mode on all of them, then swaps the new container with the old in one
    /// `renameat2(RENAME_EXCHANGE)` (`removeReplaced` removes the old). Before the swap the old
    /// data is as it was; after it the new one is the app's.
    public func commit() throws {
        let parent = try FileDescriptor.directory(store.root.dataContainersPath)
        let top = try parent.openDirectory(name)
        try DataContainer.populate(top, uid: app.uid, gid: app.gid)
        try store.applyDataQuota(top, uid: app.uid, bundleID: app.bundleID, path: path)
        // Durable before the swap, as an install is before its commit: after it the old data goes.
        try top.syncFilesystem()
        let old = app.dataUUID
        guard appd_rename_exchange(parent.raw, name, parent.raw, old) == 0 else {
            throw AppdError.system("swap \(path) with \(parent.child(old))")
        }
        committed = true
        try? parent.sync()
    }

    /// Removes the old data (under the new name since the swap). Apart from `commit` so the
    /// restore can answer first; the state lock is held until this value goes. Should it
    /// fail, the mark makes the next change's recovery remove it (or quarantine it for doctor).
    public func removeReplaced() {
        guard committed, let parent = try? FileDescriptor.directory(store.root.dataContainersPath)
        else { return }
        if (try? parent.removeTree(name)) != nil { store.mutationFinished() }
    }
}

extension AppStore {
    /// A new, empty data container for `app`, built beside its own (see RestoredContainer).
    public func restoredContainer(for app: InstalledApp) throws -> RestoredContainer {
        try RestoredContainer(store: self, app: app)
    }
}
