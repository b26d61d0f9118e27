import AppdAPI
import AppdBase
import Foundation
import Glibc
import LifecycleProtocol

/// The app's side of the conversation on the lifecycle channel (docs/lifecycle.md): hello and
/// the launch watchdog, ready, background tasks and their expiry, memory warnings.
extension Supervisor {
    /// Starts reading the daemon's end of a new instance's channel; messages are handled in
    /// the order the app sent them.
    func openChannel(id: String, fd: Int32) -> LifecycleChannel {
        let channel = LifecycleChannel(fd: fd, queue: channelQueue)
        Task { [weak self] in
            for await message in channel.messages {
                guard let self else { return }
                await self.received(id, message)
            }
            // Ended: by the app, by the daemon (then the entry no longer holds it), or as a
            // protocol error the reader found.
            await self?.received(id, channel.ending)
        }
        return channel
    }

    func received(_ id: String, _ message: AppMessage) {
        guard var entry = table.entries[id], entry.state != .exited, entry.life.channel != nil
        else {
            return
        }
        let speaking = entry.channel == .launching || entry.channel == .ready
        // Only a message that changes something is published and saved: one the app repeats
        // (a second hello, ready when ready, a task it does not hold) costs the daemon nothing
        // but the parse, so an app within its rate cannot fill /v1/events or the disk.
        let heard = { (entry: Instance) in
            self.publish(.message, entry.api, detail: "<- \(message.name)")
        }
        switch message {
        case .hello:
            guard entry.channel == .silent else { return }
            heard(entry)
            entry.channel = .launching
            // Launching is inactive, wherever it is headed; `ready` brings it the rest of the way
            // (didBecomeActive, or didEnterBackground for a launch into the background).
            entry.life.told = .inactive
            var launchedBy: [String: Any] = [LifecycleField.uid.rawValue: Int(entry.launchedBy)]
            if let user = getpwuid(entry.launchedBy)?.pointee.pw_name {
                launchedBy[LifecycleField.user.rawValue] = String(cString: user)
            }
            send(
                entry,
                DaemonMessage(
                    .didFinishLaunching,
                    [
                        .instance: id, .arguments: entry.arguments, .launchedBy: launchedBy,
                        .state: entry.life.told.rawValue,
                    ]))
            scheduleWatchdog(id)
        case .ready:
            guard entry.channel == .launching else { return }
            heard(entry)
            entry.channel = .ready
            tell(&entry)
        case .beginBackgroundTask(let name, let ref, let seconds):
            guard speaking else { return }
            // Always answered; published and saved only when granted.
            guard beginTask(&entry, name: name, ref: ref, seconds: seconds) else { return }
            heard(entry)
        case .endBackgroundTask(let task):
            guard entry.life.tasks.removeValue(forKey: task) != nil else { return }
            heard(entry)
            entry.backgroundTasks = entry.life.tasks.count
            save(entry)
            backgroundCheck(id)
            return
        case .setFetchInterval(let seconds):
            guard speaking else { return }
            setFetchInterval(entry, seconds: seconds)
            return
        case .fetchCompleted(let fetch, let result):
            // Out of turn (no fetch in hand, or another one's number): ignored.
            guard entry.life.fetch?.number == fetch else { return }
            heard(entry)
            fetchAnswered(&entry, result)
        case .unknown:
            return
        case .protocolError(let why):
            publish(
                .message, entry.api, detail: "channel closed: \(why); a plain program from now on")
            closeChannel(&entry)
        case .closed:
            closeChannel(&entry)
        }
        save(entry)
    }

    /// No more messages either way. An app that had spoken is `closed`; one that never did
    /// stays `silent` (a plain program that closed the fds it inherited).
    func closeChannel(_ entry: inout Instance) {
        entry.life.channel?.close()
        entry.life.channel = nil
        if entry.channel != .silent { entry.channel = .closed }
        entry.life.tasks = [:]
        entry.backgroundTasks = 0
        let id = entry.id
        Task { self.backgroundCheck(id) }
    }

    // MARK: Watchdog

    func scheduleWatchdog(_ id: String) {
        let seconds = lifecycle.launchWatchdog
        Task {
            try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            self.watchdogFired(id, after: seconds)
        }
    }

    /// No `ready` within `LaunchWatchdog` of `hello`: killed. A frozen app cannot answer, so
    /// the watchdog starts again when it is thawed.
    func watchdogFired(_ id: String, after seconds: Double) {
        guard var entry = table.entries[id], LifecycleController.watchdogEnds(entry) else {
            return
        }
        end(
            &entry, .launchWatchdog,
            message: "said hello but not ready within \(Self.seconds(seconds)) (LaunchWatchdog)")
    }

    func rearmWatchdogIfLaunching(_ entry: Instance) {
        if entry.channel == .launching { scheduleWatchdog(entry.id) }
    }

    // MARK: Background tasks

    /// Answers a request for a background task; true if it was granted.
    @discardableResult
    func beginTask(_ entry: inout Instance, name: String, ref: Int?, seconds: Double?) -> Bool {
        var answer = DaemonMessage(.backgroundTaskBegan, [.task: 0])
        if let ref { answer.fields[.ref] = ref }
        let decision = controller.beginTask(&entry, name: name, seconds: seconds, now: Date())
        switch decision {
        case .refused(let reason):
            answer.fields[.reason] = reason
        case .granted(let task, let time):
            answer.fields[.task] = task
            answer.fields[.timeRemaining] = time
            let id = entry.id
            Task {
                try? await Task.sleep(nanoseconds: UInt64(time * 1e9))
                self.taskExpired(id, task)
            }
        }
        send(entry, answer, publishing: decision.isGranted)
        return decision.isGranted
    }

    /// The task's time is up: the app is warned and gets `BackgroundTaskExpirationGrace` to end it.
    func taskExpired(_ id: String, _ task: Int) {
        guard var entry = table.entries[id],
            let expiry = controller.taskExpired(&entry, task: task)
        else { return }
        guard case .warn(let grace) = expiry else {
            save(entry)
            return
        }
        send(entry, DaemonMessage(.backgroundTaskWillExpire, [.task: task, .timeRemaining: grace]))
        save(entry)
        Task {
            try? await Task.sleep(nanoseconds: UInt64(grace * 1e9))
            self.taskOverdue(id, task)
        }
    }

    /// Still held after the warning: in the background the app is killed (or frozen, by
    /// `ExpiredBackgroundTask`); in the foreground the task just ends.
    func taskOverdue(_ id: String, _ task: Int) {
        guard var entry = table.entries[id],
            let overdue = controller.taskOverdue(&entry, task: task)
        else { return }
        save(entry)
        switch overdue {
        case .ended: break
        case .kill(let message): end(&entry, .backgroundTaskExpired, message: message)
        case .expired(let detail):
            publish(.message, entry.api, detail: detail)
            backgroundCheck(id)
        }
    }

    // MARK: Memory warnings

    /// didReceiveMemoryWarning to every instance (of `app`, if given) that speaks the channel
    /// and is not frozen; returns the ones it reached.
    public func memoryWarning(app: AppID? = nil) -> [String] {
        var delivered: [String] = []
        for entry in table.entries.values
        where (app == nil || entry.app == app)
            && (entry.channel == .ready || entry.channel == .launching)
            && entry.state != .suspended && entry.state != .exited
        {
            if send(entry, DaemonMessage(.didReceiveMemoryWarning)) { delivered.append(entry.id) }
        }
        return delivered.sorted()
    }

    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }
}
