import AppBundle
import AppdBase
import Foundation

public struct UninstallResult: Sendable {
    public var app: InstalledApp
    /// The data container stays (and with it the uid) for the app's return.
    public var keptData: Bool
    public var recovery: RecoveryReport
}

extension AppStore {
    /// Uninstalls `id`. The registry commits first; the containers are removed after, so a crash
    /// in between leaves containers no row names, which recovery removes.
    ///
    /// With `keepData` the row stays in state `data-kept`: the data container and the uid remain
    /// reserved, and installing the same id again brings the app back to its data. Uninstalling
    /// a `data-kept` app without `keepData` removes the data and releases the uid.
    public func uninstall(_ id: String, keepData: Bool, onWait: () -> Void = {}) throws
        -> UninstallResult
    {
        let (lock, recovered) = try lockAndRecover(onWait: onWait)
        var recovery = recovered
        defer { withExtendedLifetime(lock) {} }
        let registry = try writableRegistry
        let app = try self.app(id)
        let bundles = try FileDescriptor.directory(root.bundleContainersPath)
        let data = try FileDescriptor.directory(root.dataContainersPath)

        if keepData {
            guard app.state == .installed else {
                throw AppdError(
                    .notFound, "\(app.bundleID) is already uninstalled (its data is kept)",
                    hint: "'appd uninstall \(app.bundleID)' without --keep-data removes the data")
            }
            var kept = app
            kept.state = .dataKept
            kept.bundleUUID = nil
            kept.bundleName = nil
            try registry.save(kept)
            CrashPoint.reach("uninstall.committed")
            if let bundleUUID = app.bundleUUID {
                _ = discardReporting(bundleUUID, in: bundles, into: &recovery)
            }
            mutationFinished()
            return UninstallResult(app: kept, keptData: true, recovery: recovery)
        }

        try registry.delete(app.bundleID)
        CrashPoint.reach("uninstall.committed")
        // The row is gone: whatever cannot be removed now is quarantined and reported, and the
        // uninstall stands (the app is gone, and nothing later waits on its leftovers).
        if let bundleUUID = app.bundleUUID {
            _ = discardReporting(bundleUUID, in: bundles, into: &recovery)
        }
        CrashPoint.reach("uninstall.bundle-removed")
        _ = discardReporting(app.dataUUID, in: data, into: &recovery)
        clearDataQuota(uid: app.uid)
        CrashPoint.reach("uninstall.data-removed")
        // iOS: a group's container goes with the last app that uses it. A crash before this
        // leaves groups no app uses, which recovery removes.
        try removeUnusedGroups(
            (try? app.decodedEntitlements().strings(EntitlementCatalog.applicationGroups)) ?? [],
            into: &recovery)
        mutationFinished()
        return UninstallResult(app: app, keptData: false, recovery: recovery)
    }
}
