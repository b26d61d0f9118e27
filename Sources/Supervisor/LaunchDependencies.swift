import AppContainers
import Foundation
import Sandbox

extension Supervisor {
    /// What a launch works with off the actor, as one value: the collaborators it shares with
    /// the actor (each safe to use from many launches at once) and the settings as they were
    /// when it left the actor.
    struct LaunchDependencies: Sendable {
        var catalog: any AppCatalog
        var spawner: any InstanceSpawner
        var records: RecordStore
        var logs: InstanceLogs
        var denials: DenialLog
        var logMaxBytes: Int64
        var journalSocket: String?
        var logDenials: Bool
    }

    /// The collaborators and the settings as they are now.
    var launchDependencies: LaunchDependencies {
        LaunchDependencies(
            catalog: catalog, spawner: spawner, records: records, logs: logs, denials: denials,
            logMaxBytes: settings.logMaxBytes, journalSocket: journalSocket,
            logDenials: logDenials)
    }
}
