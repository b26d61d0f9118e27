import AppBundle
import AppContainers
import AppdAPI
import Foundation

extension Supervisor {
    /// Starts reading the kernel's denials (AuditReader): call once, from `appd serve`.
    public nonisolated func startDenialLog() { auditReader.start() }

    public nonisolated func stopDenialLog() { auditReader.stop() }

    /// appd's own refusal at launch: entitlements the app was granted that the admin's
    /// `[App ID] RevokeEntitlements=` takes away. One denial per key, on the instance.
    func recordRevokedEntitlements(_ app: InstalledApp, instance: String) {
        guard let override = store.config.override(for: app.bundleID),
            !override.revokedEntitlements.isEmpty,
            let granted = try? app.decodedEntitlements()
        else { return }
        for key in granted.values.keys.sorted() where override.revokes(key) {
            denials.record(
                app: app.bundleID, instance: instance, source: .appd, what: "entitlement",
                detail:
                    "\(key) revoked by [App \(app.bundleID)] RevokeEntitlements=")
        }
    }
}
