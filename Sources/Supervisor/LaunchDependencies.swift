import AppContainers
import Foundation
import Sandbox
import Synchronization

extension Supervisor {
    /// What a launch works with off the actor, as one value: the collaborators it shares with
    /// the actor (each safe to use from many launches at once) and the settings as they were
    /// when it left the actor.
    struct LaunchDependencies: Sendable {
        var store: AppStore
        var kernel: KernelLayers
        var driver: any CgroupDriver
        var records: RecordStore
        var logs: InstanceLogs
        var bpfCache: BPFCache
        var denials: DenialLog
        var templates: NamespaceTemplates
        var spawner: LauncherSpawner?
        var launcher: String
        var logMaxBytes: Int64
        var journalSocket: String?
        var logDenials: Bool
    }

    /// The collaborators and the settings as they are now.
    var launchDependencies: LaunchDependencies {
        LaunchDependencies(
            store: store, kernel: kernel, driver: driver, records: records, logs: logs,
            bpfCache: bpfCache, denials: denials, templates: templates, spawner: spawner,
            launcher: launcher, logMaxBytes: settings.logMaxBytes, journalSocket: journalSocket,
            logDenials: logDenials)
    }
}

/// Compiled seccomp filters by rule set: every app with the same entitlements shares one, so
/// libseccomp runs once per rule set, not once per launch. Shared by launches running side by
/// side off the actor; at most 256 rule sets are kept (then it starts over).
final class BPFCache: Sendable {
    private let filters = Mutex<[SeccompRules: [UInt8]]>([:])

    func filter(for rules: SeccompRules) throws -> [UInt8] {
        if let cached = filters.withLock({ $0[rules] }) { return cached }
        // Compiled outside the lock: two launches may both compile a new rule set once.
        let compiled = try SeccompCompiler.bpf(for: rules)
        filters.withLock { filters in
            if filters.count >= 256 { filters.removeAll() }
            filters[rules] = compiled
        }
        return compiled
    }
}
