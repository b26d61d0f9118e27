import AppRuntime
import Foundation

/// The document sample: its notes live in Documents/notes.plist, saved when the app goes to the
/// background or is terminated and restored on the next launch, as an iOS app must (a
/// suspended app can be killed without another word). Every line it prints starts with
/// `notes:` so a test can follow it.
final class NotesApp: AppDelegate {
    private var notes: [String] = []
    private var file: URL?
    private var fetches = 0

    func didFinishLaunching(options: LaunchOptions) {
        let container: AppContainer
        do {
            container = try AppContainer.current()
        } catch {
            say("cannot find my container: \(error)")
            exit(1)
        }
        file = container.documents.appendingPathComponent("notes.plist")
        if let resources = try? Resources.main() {
            say("title \(resources.localizedString(forKey: "title", value: "Notes"))")
        }
        restore()

        // -note TEXT (the arguments domain) adds that note; otherwise each launch adds one.
        let preferences = Preferences.standard
        let launches = preferences.integer(forKey: "launches") + 1
        preferences.set(launches, forKey: "launches")
        let note = preferences.string(forKey: "note") ?? "note from launch \(launches)"
        notes.append(note)
        say("greeting \(preferences.string(forKey: "greeting") ?? "none")")
        say("launch \(launches), added \"\(note)\" (\(notes.count) notes)")
        say("attached to appd: \(options.isAttachedToDaemon ? "yes" : "no")")

        // Background fetch: appd wakes it, suspended, at most this often (-fetchInterval
        // SECONDS; appd's MinimumFetchInterval bounds it).
        let interval = preferences.double(forKey: "fetchInterval")
        Application.shared.setMinimumBackgroundFetchInterval(interval > 0 ? interval : 3600)
    }

    /// Woken for a background fetch: a "fetched" note, saved, and the answer.
    func performFetch(completion: @escaping @MainActor (BackgroundFetchResult) -> Void) {
        fetches += 1
        notes.append("fetched \(fetches)")
        say("fetched \(fetches) (\(notes.count) notes)")
        save(reason: "performFetch")
        completion(.newData)
    }

    /// `appd defaults com.example.notes write greeting …` while it runs.
    func defaultsDidChange() {
        say(
            "defaults changed: greeting \(Preferences.standard.string(forKey: "greeting") ?? "none")"
        )
    }

    func didBecomeActive() { say("active") }
    func willResignActive() { say("inactive") }
    func willEnterForeground() { say("entering foreground") }
    func didReceiveMemoryWarning() { say("memory warning") }

    func didEnterBackground() {
        // Background time for the save, as iOS apps ask for it; ended as soon as it is done.
        let task = Application.shared.beginBackgroundTask(name: "save notes") {
            self.say("background time for the save ran out")
        }
        save(reason: "didEnterBackground")
        Application.shared.endBackgroundTask(task)
    }

    func willTerminate() { save(reason: "willTerminate") }

    private func restore() {
        guard let file, let data = try? Data(contentsOf: file) else {
            say("no saved notes")
            return
        }
        guard
            let saved = try? PropertyListSerialization.propertyList(from: data, format: nil)
                as? [String]
        else {
            say("\(file.path) is damaged; starting with no notes")
            return
        }
        notes = saved
        say("restored \(notes.count) notes")
    }

    private func save(reason: String) {
        guard let file else { return }
        do {
            try FileManager.default.createDirectory(
                at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            let data = try PropertyListSerialization.data(
                fromPropertyList: notes, format: .binary, options: 0)
            try data.write(to: file, options: .atomic)
            say("saved \(notes.count) notes (\(reason))")
        } catch {
            say("cannot save to \(file.path): \(error)")
        }
    }

    private func say(_ line: String) { print("notes: \(line)") }
}
