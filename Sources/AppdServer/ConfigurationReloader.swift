import AppContainers
import AppdAPI
import AppdBase
import AppdConfig
import Foundation
import Glibc
import Logging
import Supervisor

/// `systemctl reload appd` (SIGHUP), `appd reload` (`POST /v1/reload`): reads appd.conf
/// again and puts it in force for whatever starts after it (installs, launches, API checks,
/// lifecycle decisions), without touching running apps. A file that does not parse is refused
/// whole, naming the file and line, and the settings in force stay. One reload at a time: an
/// actor.
actor ConfigurationReloader {
    /// Where appd.conf is; `explicit`: named by --config or APPD_CONFIG (then it must exist).
    struct Source: Sendable {
        var path: String
        var explicit: Bool
    }

    let source: Source
    let store: AppStore
    let configuration: LiveConfiguration
    let supervisor: Supervisor
    let systemd: SystemdNotifier
    let logger: Logger
    /// The STATUS= line of a daemon at work ("serving on ...; N running instance(s)").
    let statusLine: @Sendable () async -> String

    init(
        source: Source, store: AppStore, configuration: LiveConfiguration, supervisor: Supervisor,
        systemd: SystemdNotifier,
        logger: Logger,
        statusLine: @escaping @Sendable () async -> String
    ) {
        self.source = source
        self.store = store
        self.configuration = configuration
        self.supervisor = supervisor
        self.systemd = systemd
        self.logger = logger
        self.statusLine = statusLine
    }

    func reload() async throws -> APIReloadResult {
        systemd.reloading(status: "reloading \(source.path)")
        let old = configuration.current
        var new: AppdConfiguration
        let restartRequired: [String]
        do {
            new = try AppdConfiguration.load(path: source.path, explicit: source.explicit)
            restartRequired = Self.keepRestartOnly(from: old, in: &new)
            // The supervisor first: it checks the launcher, and if that fails nothing changed.
            try await supervisor.applySettings(new)
        } catch {
            let message = (error as? AppdError)?.description ?? "\(error)"
            logger.error("reload refused, the previous settings stay: \(message)")
            systemd.ready(
                status: "reload refused (\(message.split(separator: "\n").first ?? "")); "
                    + "previous settings in force; " + (await statusLine()))
            throw error
        }
        let changed = Self.changedSections(old, new)
        configuration.replace(with: new)
        let applied = await applyOverrides(old: old, new: new)
        var metadata: Logger.Metadata = ["config": "\(source.path)"]
        if !applied.isEmpty { metadata["applied"] = "\(applied.joined(separator: "; "))" }
        if !restartRequired.isEmpty {
            metadata["restart_required"] = "\(restartRequired.joined(separator: " "))"
        }
        let summary =
            "reloaded \(source.path): "
            + (changed.isEmpty ? "nothing changed" : "changed \(changed.joined(separator: ", "))")
            + (restartRequired.isEmpty
                ? "" : "; takes a restart: \(restartRequired.joined(separator: ", "))")
        logger.info("\(summary)", metadata: metadata)
        systemd.ready(status: await statusLine())
        let exists = access(source.path, F_OK) == 0
        return APIReloadResult(
            config: exists ? source.path : nil, changed: changed, restartRequired: restartRequired,
            applied: applied)
    }

    /// A changed `[App ID]` section's limits on that app's running instances and its data
    /// container's quota, at once (docs: README "Per-app overrides").
    private func applyOverrides(old: AppdConfiguration, new: AppdConfiguration) async -> [String] {
        var applied = await supervisor.applyOverrideLimits(old: old, new: new)
        let ids = Set(old.apps.keys).union(new.apps.keys).sorted()
        for id in ids {
            let before = old.override(for: id)?.sandboxValue("DataQuota")
            let after = new.override(for: id)?.sandboxValue("DataQuota")
            guard before != after, let app = try? store.app(id.spelling) else { continue }
            do {
                if let done = try store.applyDataQuotaLimit(for: app) {
                    applied.append("\(app.bundleID): \(done)")
                }
            } catch {
                applied.append("\(app.bundleID): data quota NOT APPLIED: \(error)")
            }
        }
        return applied
    }

    /// Puts the old values of the settings only a restart applies back into `new` (so that
    /// `configuration.current` says what is in force); returns the keys whose value the file changed.
    static func keepRestartOnly(from old: AppdConfiguration, in new: inout AppdConfiguration)
        -> [String]
    {
        var changed: [String] = []
        func keep<T: Equatable>(_ name: String, _ path: WritableKeyPath<AppdConfiguration, T>) {
            if new[keyPath: path] != old[keyPath: path] {
                changed.append(name)
                new[keyPath: path] = old[keyPath: path]
            }
        }
        // The listening socket exists already (or systemd passed it).
        keep("[API] Socket", \.api.socket)
        keep("[API] SocketMode", \.api.socketMode)
        keep("[API] SocketGroup", \.api.socketGroup)
        // The connection caps are counted from the daemon's start (ConnectionLimits); the
        // unit's LimitNOFILE= was sized for them.
        keep("[API] MaxConnections", \.api.maxConnections)
        keep("[API] ReservedConnections", \.api.reservedConnections)
        keep("[API] MaxConnectionsPerUser", \.api.maxConnectionsPerUser)
        keep("[API] MaxStreamsPerUser", \.api.maxStreamsPerUser)
        keep("[API] RequestTimeout", \.api.requestTimeout)
        // appd's fd limit was sized for it at the start (FDBudget).
        keep("[Supervisor] MaxInstances", \.supervisor.maxInstances)
        // Running instances' cgroups are below the parent: moving it would lose them.
        keep("[Supervisor] CgroupParent", \.supervisor.cgroupParent)
        // The audit reader starts (and turns audit on) with the daemon, or not at all.
        keep("[Supervisor] DenialLog", \.supervisor.denialLog)
        // Each instance's log writer was started with it.
        keep("[Supervisor] LogMaxBytes", \.supervisor.logMaxBytes)
        return changed
    }

    static func changedSections(_ old: AppdConfiguration, _ new: AppdConfiguration) -> [String] {
        var sections: [String] = []
        if old.bundleLimits != new.bundleLimits { sections.append("[Bundle]") }
        if old.uidRange != new.uidRange || old.groupRange != new.groupRange
            || old.maxGroupsPerApp != new.maxGroupsPerApp
            || old.maxGroupsPerSigner != new.maxGroupsPerSigner
        {
            sections.append("[Users]")
        }
        if old.sandbox != new.sandbox { sections.append("[Sandbox]") }
        if old.api != new.api { sections.append("[API]") }
        if old.supervisor != new.supervisor { sections.append("[Supervisor]") }
        if old.lifecycle != new.lifecycle { sections.append("[Lifecycle]") }
        if old.apps != new.apps { sections.append("[App]") }
        var signing = old.signing
        signing.signers = new.signing.signers
        if signing != new.signing { sections.append("[Signing]") }
        let before = Set(old.signing.signers.map(\.name))
        let after = Set(new.signing.signers.map(\.name))
        for signer in new.signing.signers
        where !before.contains(signer.name)
            || old.signing.signers.first(where: { $0.name == signer.name }) != signer
        {
            sections.append("[Signer \(signer.name)]")
        }
        for signer in old.signing.signers where !after.contains(signer.name) {
            sections.append("[Signer \(signer.name)] (removed)")
        }
        return sections
    }
}
