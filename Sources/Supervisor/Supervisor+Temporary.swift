import AppContainers
import AppdAPI
import AppdBase
import Foundation

/// `tmp/` is the system's: emptied when an app's last instance exits, and at a launch that
/// finds it holding something while none of the app's instances runs (the daemon that should
/// have emptied it at the exit had crashed). Both run on the actor, so no launch of the app
/// starts while its tmp is emptied, and no emptying runs under a starting instance. The work
/// is what the app put in tmp, which its data quota bounds; the remover is iterative, so depth
/// costs no stack (AppStore+Temporary.swift).
extension Supervisor {
    /// Whether an instance of the app (lowercased `key`) other than `except` is live, or a
    /// launch of it is under way.
    func appIsRunning(_ key: String, except: String? = nil) -> Bool {
        if launching[key, default: 0] > 0 { return true }
        return entries.values.contains {
            $0.id != except && $0.state.isLive && $0.app.lowercased() == key
        }
    }

    /// An instance of `appID` ended: if it was the last, empties the app's tmp. A failure
    /// (a mount point inside, an uninstalled app) is an event, not an error: the exit happened.
    func emptyTemporaryAfterExit(appID: String, instance: String) {
        guard !appIsRunning(appID.lowercased(), except: instance) else { return }
        emptyTemporary(appID: appID, instance: instance, when: "after its last instance exited")
    }

    /// A launch of `appID` with none of its instances running: empties tmp if it holds
    /// anything (the exit that should have emptied it happened while appd was down).
    func emptyTemporaryBeforeLaunch(appID: String) {
        guard !appIsRunning(appID.lowercased()),
            let app = try? store.app(appID),
            (try? store.temporaryDirectoryHasEntries(of: app)) == true
        else { return }
        emptyTemporary(
            appID: app.bundleID, instance: nil, when: "before a launch (left from before a restart)"
        )
    }

    private func emptyTemporary(appID: String, instance: String?, when: String) {
        let detail: String
        do {
            let app = try store.app(appID)
            let count = try store.emptyTemporaryDirectory(of: app)
            guard count > 0 else { return }
            detail = "tmp emptied \(when): \(count) entr\(count == 1 ? "y" : "ies") removed"
        } catch {
            detail = "tmp not emptied \(when): \(error)"
        }
        hub.publish { seq in
            APIEvent(
                seq: seq, time: Date(), kind: .message, app: appID, instance: instance,
                detail: detail)
        }
    }
}
