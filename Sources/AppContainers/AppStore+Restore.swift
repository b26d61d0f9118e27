import AppdBase
import CLinux
import Foundation
import Glibc
import Sandbox

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

    /// Removes `folder` of the new container if the backup made it (the `AppGroups` a restore
    /// without `--groups` leaves, or what the group restores left of it).
    public func removeExtracted(_ folder: String) throws {
        let top = try FileDescriptor.directory(path)
        if top.exists(folder) { try top.removeTree(folder) }
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

/// A group container being restored (`appd restore --groups`): the backup's
/// `AppGroups/<id>/`, extracted into the new data container, moved by rename to
/// `Containers/Shared/AppGroup/<uuid>` beside the group's own, made the group's (every entry
/// the restoring app's uid and the group's gid, folders 2770 as the group's are, files group
/// read-write, nothing for others, charged to the group's project), and swapped with the old
/// container in one `renameat2(RENAME_EXCHANGE)`. Made and swapped under the restore's state
/// lock (`RestoredContainer`): a crash leaves an unnamed group container, which recovery
/// removes. Removed with this value unless it was swapped in.
public final class RestoredGroup: @unchecked Sendable {
    public let group: SandboxSubject.GroupContainer
    let name: String
    let uuid: String
    let store: AppStore
    private var swapped = false

    init(
        store: AppStore, group: SandboxSubject.GroupContainer, extracted: FileDescriptor,
        folder: String, owner: UInt32
    ) throws {
        self.store = store
        self.group = group
        uuid = URL(fileURLWithPath: group.path).lastPathComponent
        name = UUID().uuidString
        let parent = try FileDescriptor.directory(store.root.groupContainersPath)
        try extracted.rename(folder, to: parent, as: name)
        let top = try parent.openDirectory(name)
        let enforced =
            store.config.sandbox.dataQuota != nil
            && DataQuota.support(fd: top.raw) == .enforced
        try Self.makeGroups(top, uid: owner, gid: group.gid, project: enforced ? group.gid : nil)
        try top.chown(uid: 0, gid: group.gid)
        try top.chmod(0o2770)
        try store.applyGroupQuota(top, gid: group.gid)
    }

    deinit {
        // Before the swap the new one goes; after it, the old one under the new name.
        if let parent = try? FileDescriptor.directory(store.root.groupContainersPath) {
            _ = try? parent.removeTree(name)
        }
    }

    /// Swaps the restored container in; the old one is removed when this value goes.
    public func commit() throws {
        try exchange()
        swapped = true
    }

    /// Swaps the old container back, after a later step of the restore failed.
    public func rollBack() {
        guard swapped, (try? exchange()) != nil else { return }
        swapped = false
    }

    private func exchange() throws {
        let parent = try FileDescriptor.directory(store.root.groupContainersPath)
        guard appd_rename_exchange(parent.raw, name, parent.raw, uuid) == 0 else {
            throw AppdError.system("swap \(parent.child(name)) with \(group.path)")
        }
        try? parent.sync()
    }

    /// Every entry beneath `top` (this restore's own tree, which no app can reach yet: it is
    /// walked beneath `top` refusing links all the same) made the group's.
    static func makeGroups(_ top: FileDescriptor, uid: UInt32, gid: UInt32, project: UInt32?)
        throws
    {
        var pending = ["."]
        while let path = pending.popLast() {
            let fd = appd_open_directory_beneath(top.raw, path)
            guard fd >= 0 else { throw AppdError.system("open \(top.child(path))") }
            let dir = FileDescriptor(raw: fd, path: top.child(path))
            for name in try dir.entries() {
                var st = Glibc.stat()
                guard fstatat(dir.raw, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else {
                    throw AppdError.system("stat \(dir.child(name))")
                }
                guard fchownat(dir.raw, name, uid, gid, AT_SYMLINK_NOFOLLOW) == 0 else {
                    throw AppdError.system("chown \(dir.child(name))")
                }
                let type = st.st_mode & S_IFMT
                guard type == S_IFDIR || type == S_IFREG else { continue }
                let mode: mode_t =
                    type == S_IFDIR ? 0o2770 : (st.st_mode & 0o111 != 0 ? 0o770 : 0o660)
                guard fchmodat(dir.raw, name, mode, 0) == 0 else {
                    throw AppdError.system("chmod \(dir.child(name))")
                }
                if type == S_IFDIR { pending.append(path == "." ? name : "\(path)/\(name)") }
                if let project {
                    let entry = openat(dir.raw, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
                    guard entry >= 0 else { throw AppdError.system("open \(dir.child(name))") }
                    let file = FileDescriptor(raw: entry, path: dir.child(name))
                    try DataQuota.assign(file, projectID: project, path: file.path)
                }
            }
        }
    }
}

extension AppStore {
    /// The restored container of `group`, from the folder `folder` of `extracted` (the new
    /// data container's `AppGroups`), for the app of uid `owner` (see RestoredGroup).
    public func restoredGroup(
        _ group: SandboxSubject.GroupContainer, from folder: String, in extracted: String,
        owner: UInt32
    ) throws -> RestoredGroup {
        try RestoredGroup(
            store: self, group: group, extracted: try FileDescriptor.directory(extracted),
            folder: folder, owner: owner)
    }

    /// The installed apps that use any of `groups` (their bundle ids): what a backup with
    /// `--groups` freezes, and a restore with it needs stopped.
    public func appsSharing(_ groups: [SandboxSubject.GroupContainer]) throws -> [String] {
        let paths = Set(groups.map(\.path))
        guard !paths.isEmpty else { return [] }
        return try apps().filter { app in
            try groupContainers(for: app).contains { paths.contains($0.path) }
        }.map(\.bundleID)
    }
}
