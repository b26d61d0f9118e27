import AppContainers
import AppdAPI
import AppdConfig
import Foundation
import Sandbox

extension Supervisor {
    /// Starts reading the kernel's denials (AuditReader): call once, from `appd serve`. With
    /// `[Supervisor] DenialLog=no` it does not start (audit is left as it is) and only appd's
    /// own refusals are logged.
    public func startDenialLog() {
        auditReader.start(enabled: settings.denialLog)
        logDenials = Self.shouldLogDenials(settings)
    }

    /// Whether launches ask the kernel to audit the app's denials (the profile's
    /// `log-denials`): the denial log is on, and audit's failure mode is not panic — then a
    /// record lost to an app's flood of denials would panic the host (`auditctl -f 2`), and
    /// an app must never be able to do that.
    static func shouldLogDenials(_ settings: SupervisorSettings) -> Bool {
        settings.denialLog && !KernelDenialReporting.auditFailurePanics()
    }

    public nonisolated func stopDenialLog() { auditReader.stop() }

    /// appd's own refusal at launch: entitlements the app was granted that the admin's
    /// `[App ID] RevokeEntitlements=` takes away. One denial per key, on the instance.
    func recordRevokedEntitlements(_ app: InstalledApp, instance: String) {
        guard let override = configuration.current.override(for: app.bundleID),
            !override.revokedEntitlements.isEmpty,
            let granted = try? app.decodedEntitlements()
        else { return }
        for key in granted.values.keys.sorted() where override.revokes(key) {
            denials.record(
                app: app.appID, instance: instance, source: .appd, what: "entitlement",
                detail:
                    "\(key) revoked by [App \(app.bundleID)] RevokeEntitlements=")
        }
    }
}
