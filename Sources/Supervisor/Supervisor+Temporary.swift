import AppContainers
import AppdAPI
import AppdBase
import Foundation

/// `tmp/` is the system's: emptied when an app's last instance exits, and at a launch that
/// finds it holding something while none of the app's instances runs (the daemon that should
/// have emptied it at the exit had crashed). After an exit the emptying runs off the actor (an
/// app's 20,000-level tree takes seconds, and `appctl ps` must not wait for it); a launch or
/// an uninstall of that app waits for it first, so no instance starts under it. The work is
/// what the app put in tmp, which its data quota bounds; the remover is iterative, so depth
/// costs no stack (AppStore+Temporary.swift).
extension Supervisor {
    /// Whether an instance of `app` other than `except` is live, or a launch of it is under
    /// way.
    func appIsRunning(_ app: AppID, except: String? = nil) -> Bool {
        table.appIsRunning(app, except: except)
    }

    /// An instance of `appID` ended: if it was the last, empties the app's tmp off the actor.
    /// Returns the emptying, which the exit's waiters wait for; nil when another instance runs.
    /// A failure (a mount point inside, an uninstalled app) is an event, not an error: the exit
    /// happened.
    func emptyTemporaryAfterExit(appID key: AppID, instance: String) -> Task<Void, Never>? {
        guard !appIsRunning(key, except: instance) else { return nil }
        let previous = emptyingTemporary[key]
        let (catalog, hub, launched) = (catalog, hub, launchedApps[key])
        let task = Task.detached {
            await previous?.value
            let when = "after its last instance exited"
            do {
                let app = try launched ?? catalog.app(key.spelling)
                if Self.emptyTemporary(
                    catalog: catalog, hub: hub, app: app, instance: instance, when: when)
                {
                    await self.temporaryEmptied(key)
                }
            } catch {
                Self.publish(hub, key.spelling, instance, "tmp not emptied \(when): \(error)")
            }
        }
        emptyingTemporary[key] = task
        Task {
            await task.value
            self.emptyingDone(key, task)
        }
        return task
    }

    /// The app's tmp is empty and none of its instances runs: until its next launch, nothing
    /// can write there (only its own uid may, and backups never hold tmp).
    private func temporaryEmptied(_ key: AppID) {
        if !appIsRunning(key), table.launches(of: key) == 0 { temporaryAtRest.insert(key) }
    }

    private func emptyingDone(_ key: AppID, _ task: Task<Void, Never>) {
        if emptyingTemporary[key] == task { emptyingTemporary[key] = nil }
    }

    /// Waits until no emptying of the app's tmp is under way. After it returns, the caller
    /// must not suspend before it counts its launch (or closes the app).
    func waitForTemporaryEmptying(_ key: AppID) async {
        while let pending = emptyingTemporary[key] {
            await pending.value
            // Awaiting a finished task need not yield the actor, so the `emptyingDone` queued
            // behind it may not have run: forget it here, or this loop would spin.
            if emptyingTemporary[key] == pending { emptyingTemporary[key] = nil }
        }
    }

    /// A launch of `appID` with none of its instances running: empties tmp if it holds
    /// anything (the exit that should have emptied it happened while appd was down).
    func emptyTemporaryBeforeLaunch(appID key: AppID) {
        guard temporaryAtRest.remove(key) == nil, !appIsRunning(key),
            let app = try? catalog.app(key.spelling),
            (try? catalog.temporaryDirectoryHasEntries(of: app)) == true
        else { return }
        Self.emptyTemporary(
            catalog: catalog, hub: hub, app: app, instance: nil,
            when: "before a launch (left from before a restart)")
    }

    /// Empties the app's tmp; whether it is empty now (the failure is an event).
    @discardableResult
    private nonisolated static func emptyTemporary(
        catalog: any AppCatalog, hub: EventHub, app: InstalledApp, instance: String?, when: String
    ) -> Bool {
        let detail: String
        do {
            let count = try catalog.emptyTemporaryDirectory(of: app)
            guard count > 0 else { return true }
            publish(
                hub, app.bundleID, instance,
                "tmp emptied \(when): \(count) entr\(count == 1 ? "y" : "ies") removed")
            return true
        } catch {
            detail = "tmp not emptied \(when): \(error)"
        }
        publish(hub, app.bundleID, instance, detail)
        return false
    }

    private nonisolated static func publish(
        _ hub: EventHub, _ appID: String, _ instance: String?, _ detail: String
    ) {
        hub.publish { seq in
            APIEvent(
                seq: seq, time: Date(), kind: .message, app: appID, instance: instance,
                detail: detail)
        }
    }
}
