import AppBundle
import AppdBase
import AppdConfig
import Foundation
import Glibc
import Sandbox
import Synchronization

/// The front door of the state root: install, upgrade, uninstall, list, info, doctor.
///
/// Commands that change anything hold the state lock and first run `recover()`, so whatever a
/// crashed predecessor left behind is cleaned before new work starts.
///
/// Shared by the daemon's threads: every stored property is immutable (but a lock-guarded flag),
/// the registry is a GRDB queue (serialized), and changes are serialized by the state lock (a
/// flock, per open).
public final class AppStore: @unchecked Sendable {
    public let root: StateRoot
    /// The settings in force, for the store's own work (installs, checks, quotas). The daemon
    /// owns them and hands the same `LiveConfiguration` to each part that reads them.
    public var config: AppdConfiguration { configuration.current }
    public let configuration: LiveConfiguration
    /// nil when opened read-only on a state root that has no registry yet (nothing installed).
    let registry: Registry?
    /// A full recovery ran since this store was opened (lockAndRecover).
    let recoveredOnce = Mutex(false)
    /// Bundles the launch-time check hashed and found intact, with their fingerprint then
    /// (AppStore+Integrity.swift).
    let launchChecks = LaunchCheckCache()

    public enum Access { case readOnly, readWrite }

    public convenience init(root: StateRoot, config: AppdConfiguration, access: Access) throws {
        try self.init(root: root, configuration: LiveConfiguration(config), access: access)
    }

    public init(root: StateRoot, configuration: LiveConfiguration, access: Access) throws {
        self.root = root
        self.configuration = configuration
        let registryExists = FileManager.default.fileExists(atPath: root.registryPath)
        switch access {
        case .readOnly:
            if registryExists && Glibc.access(root.registryPath, R_OK) != 0 {
                throw AppdError(
                    .permissionDenied, "reading \(root.registryPath) needs root",
                    errno: errno, hint: "run it with sudo")
            }
            registry = registryExists ? try Registry(path: root.registryPath) : nil
        case .readWrite:
            try root.createLayout()
            if !registryExists {
                // Without the registry every container would look like garbage to recover():
                // never treat a lost registry as "nothing installed".
                let leftovers =
                    (try? FileDescriptor.directory(root.dataContainersPath).entries())
                    ?? []
                guard leftovers.isEmpty else {
                    throw AppdError(
                        .corruptState,
                        "\(root.registryPath) is missing but \(leftovers.count) data container(s) exist in \(root.dataContainersPath)",
                        hint:
                            "restore registry.sqlite from a backup; appd will not delete app data it cannot account for"
                    )
                }
            }
            registry = try Registry(path: root.registryPath)
        }
    }

    var writableRegistry: Registry {
        get throws {
            guard let registry else {
                throw AppdError(.permissionDenied, "the state root was opened read-only")
            }
            return registry
        }
    }

    /// Every app, including those uninstalled with `--keep-data`.
    public func apps() throws -> [InstalledApp] { try registry?.apps() ?? [] }

    /// The app matching `id` without regard to case.
    public func app(_ id: String) throws -> InstalledApp {
        guard let app = try registry?.app(id) else {
            throw AppdError(
                .notFound, "no app with id '\(id)' is installed",
                hint: "'appd list' shows what is installed")
        }
        return app
    }

    /// Takes the state lock and cleans up after any crashed predecessor, then marks a mutation
    /// as begun (`.mutating` in the state root, durable before anything changes); the caller
    /// clears the mark with `mutationFinished()` once it has completed.
    ///
    /// The full recovery lists every container and reads every app row: at 1,000 apps that made
    /// each install 2-3 times slower than the first ones (bench-api). Orphans only come from a
    /// mutation that did not finish, so it runs when the mark is still there (a crash, or a
    /// failure that threw), and on this store's first mutation (state roots from before the
    /// mark, or a predecessor of any kind); otherwise only staging is emptied.
    func lockAndRecover(onWait: () -> Void) throws -> (StateLock, RecoveryReport) {
        let lock = try StateLock(root, onWait: onWait)
        let full = !recoveredOnce.withLock { $0 } || access(root.mutationMarkPath, F_OK) == 0
        let report = full ? try recover() : try recoverStaging()
        recoveredOnce.withLock { $0 = true }
        try markMutation()
        return (lock, report)
    }

    /// The mutation completed: the next one need not look for its leftovers.
    func mutationFinished() {
        unlink(root.mutationMarkPath)
    }

    private func markMutation() throws {
        let fd = open(root.mutationMarkPath, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw AppdError.system("create \(root.mutationMarkPath)") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw AppdError.system("fsync \(root.mutationMarkPath)") }
        try FileDescriptor.directory(root.path).sync()
    }
}

/// What recovery removed.
public struct RecoveryReport: Sendable, Codable, Equatable {
    /// Entries of `staging/` (interrupted installs, upgrades, uninstalls).
    public var staging: [String] = []
    /// Containers no registry row names: published by an install that never committed, or
    /// left by an uninstall that committed but was stopped before removing them.
    public var orphanBundleContainers: [String] = []
    public var orphanDataContainers: [String] = []
    public var orphanGroupContainers: [String] = []
    /// What could not be removed, moved to `quarantine/` (or left where it was, when even that
    /// failed) and skipped, so that it blocks nothing: doctor reports it until it is gone.
    public var quarantined: [QuarantinedEntry] = []
    /// Application groups no app uses any more, removed with their containers.
    public var unusedGroups: [String] = []

    public var isEmpty: Bool {
        staging.isEmpty && orphanBundleContainers.isEmpty && orphanDataContainers.isEmpty
            && orphanGroupContainers.isEmpty && quarantined.isEmpty && unusedGroups.isEmpty
    }
}

/// A leftover whose removal failed.
public struct QuarantinedEntry: Sendable, Codable, Equatable {
    /// Where it is now.
    public var path: String
    /// What it was (`staging/trash-…`, a data container).
    public var origin: String
    /// Why its removal failed.
    public var reason: String
}

extension AppStore {
    /// Removes staging leftovers and containers the registry does not name. Caller holds the
    /// lock. Orphans are first renamed into staging, so a crash during the removal itself is
    /// finished by the next recovery.
    func recover() throws -> RecoveryReport {
        var report = try recoverStaging()
        let apps = try writableRegistry.apps()
        let bundles = Set(apps.compactMap(\.bundleUUID))
        let data = Set(apps.map(\.dataUUID))
        let bundleDir = try FileDescriptor.directory(root.bundleContainersPath)
        for name in try bundleDir.entries() where !bundles.contains(name) {
            if discardReporting(name, in: bundleDir, into: &report) {
                report.orphanBundleContainers.append(name)
            }
        }
        let dataDir = try FileDescriptor.directory(root.dataContainersPath)
        for name in try dataDir.entries() where !data.contains(name) {
            if discardReporting(name, in: dataDir, into: &report) {
                report.orphanDataContainers.append(name)
            }
        }
        // A group no app uses any more: its last app's uninstall committed but was stopped
        // before removing it (or it dates from before groups went with their last app).
        let inUse = try writableRegistry.groupsInUse()
        let unused = try writableRegistry.allGroups().filter {
            !inUse.contains($0.groupID.lowercased())
        }
        for record in unused {
            try writableRegistry.deleteGroup(record.groupID)
            report.unusedGroups.append(record.groupID)
        }
        let groups = Set(try writableRegistry.allGroups().map(\.uuid))
        if let groupDir = try? FileDescriptor.directory(root.groupContainersPath) {
            for name in try groupDir.entries() where !groups.contains(name) {
                if discardReporting(name, in: groupDir, into: &report) {
                    report.orphanGroupContainers.append(name)
                }
            }
        }
        return report
    }

    /// `discard` that never throws: what it cannot remove (or even move) goes into the
    /// report's `quarantined`. True when it is gone.
    func discardReporting(
        _ name: String, in directory: FileDescriptor, into report: inout RecoveryReport
    ) -> Bool {
        do {
            guard let entry = try discard(name, in: directory) else { return true }
            report.quarantined.append(entry)
        } catch {
            let reason = (error as? AppdError)?.message ?? "\(error)"
            report.quarantined.append(
                QuarantinedEntry(
                    path: directory.child(name), origin: directory.child(name), reason: reason))
        }
        return false
    }

    /// Empties staging: interrupted installs, upgrades and uninstalls, and trash. An entry that
    /// cannot be removed is quarantined, not retried forever: one hostile tree must never stop
    /// every later install, uninstall or launch.
    func recoverStaging() throws -> RecoveryReport {
        var report = RecoveryReport()
        let staging = try FileDescriptor.directory(root.stagingPath)
        for name in try staging.entries() {
            if let entry = remove(name, in: staging, origin: "\(root.stagingPath)/\(name)") {
                report.quarantined.append(entry)
            } else {
                report.staging.append(name)
            }
        }
        return report
    }

    /// Moves `name` out of `directory` into staging (atomic, so it is gone from its container
    /// directory at once), then deletes it. A removal that fails is quarantined and returned.
    @discardableResult
    func discard(_ name: String, in directory: FileDescriptor) throws -> QuarantinedEntry? {
        let staging = try FileDescriptor.directory(root.stagingPath)
        let trashName = "trash-\(UUID().uuidString)"
        try directory.rename(name, to: staging, as: trashName)
        try directory.sync()
        CrashPoint.reach("discard.moved")
        return remove(trashName, in: staging, origin: directory.child(name))
    }

    /// Removes `name` from staging; if that fails, moves what is left of it to `quarantine/`
    /// and says why. Nil when it is gone.
    private func remove(_ name: String, in staging: FileDescriptor, origin: String)
        -> QuarantinedEntry?
    {
        do {
            try staging.removeTree(name)
            return nil
        } catch {
            let reason = (error as? AppdError)?.message ?? "\(error)"
            let quarantineName = "\(name)-\(UUID().uuidString.prefix(8))"
            guard let quarantine = try? FileDescriptor.directory(root.quarantinePath),
                (try? staging.rename(name, to: quarantine, as: quarantineName)) != nil
            else {
                // Not even moved aside: it stays in staging, and the next recovery tries again
                // (and reports it again), but nothing waits on it.
                return QuarantinedEntry(path: staging.child(name), origin: origin, reason: reason)
            }
            _ = try? quarantine.sync()
            return QuarantinedEntry(
                path: quarantine.child(quarantineName), origin: origin, reason: reason)
        }
    }
}
