/// Identifies a background task to the app (UIKit's `UIBackgroundTaskIdentifier`).
///
/// It is the runtime's own number, handed out at once: appd answers a request asynchronously,
/// so its task id (`task` on the wire) is matched to this one by `ref` when the answer comes.
public struct BackgroundTaskIdentifier: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int

    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Never returned by `beginBackgroundTask`; ending it does nothing.
    public static let invalid = BackgroundTaskIdentifier(rawValue: 0)

    public var description: String { "\(rawValue)" }
}

/// The background tasks the app holds, by the runtime's identifier.
struct BackgroundTaskTable {
    struct Entry {
        var name: String?
        var expirationHandler: (@MainActor () -> Void)?
        /// appd's id, once `backgroundTaskBegan` arrived.
        var task: Int?
        /// Ended by the app before appd answered: end it as soon as the answer comes.
        var endedEarly = false
    }

    var entries: [Int: Entry] = [:]
    var nextRef = 1

    var count: Int { entries.count }

    func ref(forTask task: Int) -> Int? {
        entries.first { $0.value.task == task }?.key
    }
}

extension Application {
    /// Asks appd for time to finish work in the background. `expirationHandler` runs on the main
    /// actor when the time is up — or at once if appd refuses — and should end the task.
    ///
    /// Outside appd the task is simply granted: nothing will freeze the process.
    public func beginBackgroundTask(
        name: String? = nil, expirationHandler: (@MainActor () -> Void)? = nil
    ) -> BackgroundTaskIdentifier {
        let ref = tasks.nextRef
        tasks.nextRef += 1
        tasks.entries[ref] = .init(name: name, expirationHandler: expirationHandler)
        send(.beginBackgroundTask(name: name, ref: ref))
        return BackgroundTaskIdentifier(rawValue: ref)
    }

    /// Ends a task; unknown or already ended identifiers are ignored (as appd ignores them).
    public func endBackgroundTask(_ identifier: BackgroundTaskIdentifier) {
        guard var entry = tasks.entries[identifier.rawValue] else { return }
        if let task = entry.task {
            tasks.entries[identifier.rawValue] = nil
            send(.endBackgroundTask(task: task))
        } else if isAttachedToDaemon {
            entry.endedEarly = true
            tasks.entries[identifier.rawValue] = entry
        } else {
            tasks.entries[identifier.rawValue] = nil
        }
    }

    /// How many background tasks the app holds.
    public var backgroundTaskCount: Int { tasks.count }

    func backgroundTaskBegan(ref: Int, task: Int, reason: String?) {
        guard var entry = tasks.entries[ref], entry.task == nil else {
            log("ignored backgroundTaskBegan for unknown ref \(ref)")
            return
        }
        if task == 0 {
            log(
                "appd refused background task '\(entry.name ?? "")': \(reason ?? "no reason given")"
            )
            tasks.entries[ref] = nil
            if !entry.endedEarly { entry.expirationHandler?() }
            return
        }
        if entry.endedEarly {
            tasks.entries[ref] = nil
            send(.endBackgroundTask(task: task))
            return
        }
        entry.task = task
        tasks.entries[ref] = entry
    }

    func backgroundTaskWillExpire(task: Int) {
        guard let ref = tasks.ref(forTask: task), let entry = tasks.entries[ref] else { return }
        entry.expirationHandler?()
    }
}
