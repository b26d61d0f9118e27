import AppdBase
import LifecycleProtocol

/// `appd defaults` (docs/lifecycle.md, "Preferences"): once the daemon has rewritten an app's preferences
/// file, each running instance of the app that speaks the channel is told `defaultsDidChange`
/// and reads it again (AppRuntime's Preferences.synchronize). A suspended one finds the message
/// waiting when it is thawed, before anything else. The app is not frozen while the file is
/// written: the write is one rename, and the app reads the old domain or the new one.
extension Supervisor {
    /// Tells every ready instance of `app`; returns their ids.
    public func defaultsDidChange(_ app: AppID) -> [String] {
        var told: [String] = []
        for entry in table.entries.values
        where entry.app == app && entry.channel == .ready && entry.state.isLive {
            if send(entry, DaemonMessage(.defaultsDidChange)) { told.append(entry.id) }
        }
        return told.sorted()
    }
}
