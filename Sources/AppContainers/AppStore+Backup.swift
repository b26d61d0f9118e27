import AppdBase
import AppdConfig
import Glibc
import Sandbox

/// The most a backup of an app may hold (docs/backup.md, "Size"), and where that comes from.
public struct BackupCap: Sendable, Equatable {
    public var bytes: Int64
    /// `[Storage] BackupMaxBytes=4294967296`, `the app's DataQuota=1G (2 containers)`, ….
    public var source: String
}

extension AppStore {
    /// What a backup of `app` may hold: `[Storage] BackupMaxBytes=` when set; else what the
    /// app's quota lets its containers hold (its `DataQuota=` for the data container and each
    /// group container taken, and one more for the stream's own headers and listing); else the
    /// size of the state root's filesystem, which no restore could exceed. The smaller where
    /// both a key and a quota are set.
    public func backupCap(
        for app: InstalledApp, groups: [SandboxSubject.GroupContainer] = []
    ) -> BackupCap {
        var caps: [BackupCap] = []
        if let bytes = config.storage.backupMaxBytes {
            caps.append(BackupCap(bytes: bytes, source: "[Storage] BackupMaxBytes=\(bytes)"))
        }
        if let quota = config.dataQuota(for: app.bundleID) {
            let containers = Int64(1 + groups.count)
            let (bytes, over) = quota.multipliedReportingOverflow(by: containers + 1)
            caps.append(
                BackupCap(
                    bytes: over ? .max : bytes,
                    source:
                        "the app's DataQuota=\(quota) for \(containers) container\(containers == 1 ? "" : "s"), and as much again for the archive's own records"
                ))
        }
        if let smallest = caps.min(by: { $0.bytes < $1.bytes }) { return smallest }
        let total = FreeSpace.of(root.dataContainersPath)?.totalBytes ?? .max
        return BackupCap(
            bytes: total,
            source:
                "the size of the state root's filesystem; no [Storage] BackupMaxBytes= or DataQuota= is set"
        )
    }

    /// What the backup would take, measured before it starts: the allocated bytes of the data
    /// container's Documents and Library (not Library/Caches) and of each group container (not
    /// its Library/Caches), a file with several names once (StorageWalk). At least this much:
    /// `complete` false when the walk stopped at its bound.
    public func backupUsage(
        of app: InstalledApp, groups: [SandboxSubject.GroupContainer] = []
    ) -> (bytes: Int64, complete: Bool) {
        var walk = StorageWalk(limits: .standard)
        let data = app.dataContainer(in: root)
        var total = walk.measure(data, start: "Documents")
        total += walk.measure(data, start: "Library", excluding: ["Library/Caches"])
        for group in groups {
            total += walk.measure(group.path, start: ".", excluding: ["./Library/Caches"])
        }
        return (total, walk.complete)
    }

    /// For each installed app but `app` that uses any of `groups`: the ids of those groups it
    /// uses (what a backup with `--groups` freezes, each app until its groups are read).
    public func groupUsers(of groups: [SandboxSubject.GroupContainer], besides app: InstalledApp)
        throws -> [String: Set<String>]
    {
        guard !groups.isEmpty else { return [:] }
        var users: [String: Set<String>] = [:]
        for other in try apps() where other.appID != app.appID {
            let paths = Set(try groupContainers(for: other).map(\.path))
            let shared = groups.filter { paths.contains($0.path) }.map(\.groupID)
            if !shared.isEmpty { users[other.bundleID] = Set(shared) }
        }
        return users
    }
}
