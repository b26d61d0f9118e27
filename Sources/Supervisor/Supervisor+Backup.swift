import AppdBase
import Foundation

/// A backup is consistent: the app's running instances are frozen (the cgroup freezer, as a
/// suspend freezes) while its data container is read, and thawed after, whatever happened.
/// Their lifecycle state does not change and the app is not told: to the app, the time simply
/// did not pass. Instances already suspended stay as they are; one that a request suspends in
/// the meantime is left frozen.
extension Supervisor {
    /// Freezes every live instance of `appIDs` (the app, and with `--groups` the apps sharing
    /// its groups) that is not suspended, and returns their ids (what `thawAfterBackup` thaws).
    /// If one cannot be frozen, the ones frozen so far are thawed and the error is thrown.
    public func freezeForBackup(_ appIDs: [AppID]) throws -> [String] {
        let apps = Set(appIDs)
        var frozen: [String] = []
        for (id, entry) in table.entries
        where apps.contains(entry.app) && entry.state.isLive
            && entry.state != .suspended
        {
            guard let cgroup = entry.cgroup else { continue }
            do {
                try cgroup.freeze()
                frozen.append(id)
            } catch {
                thawAfterBackup(frozen)
                throw AppdError(
                    .unsupported, "cannot freeze instance \(id) for a consistent backup",
                    hint: "take it with --live, or terminate the app first", cause: .from(error))
            }
        }
        return frozen.sorted()
    }

    /// Thaws what `freezeForBackup` froze, but an instance suspended since.
    public func thawAfterBackup(_ ids: [String]) {
        for id in ids {
            guard let entry = table.entries[id], entry.state.isLive, entry.state != .suspended
            else {
                continue
            }
            do {
                try entry.cgroup?.thaw()
            } catch {
                publish(.state, entry.api, detail: "could not be thawed after a backup: \(error)")
            }
        }
    }
}
