import AppdAPI
import AppdBase
import CLinux
import Foundation
import Glibc
import Sandbox

extension Supervisor {
    /// The launcher is gone: reap it (if it is our child), read the status it wrote, decide
    /// the reason, clean the cgroup, tell waiters and subscribers.
    func launcherEnded(_ id: String) {
        guard var entry = table.entries[id], entry.state != .exited else { return }
        let waitStatus = entry.isChild ? Self.reap(entry) : nil
        let statusText = records.readStatus(id)
        let oomKills = (try? entry.cgroup?.events())??.oomKills ?? 0
        noteEnded(entry)
        if let cgroup = entry.cgroup {
            // Whatever the app left behind (daemons it forked, a frozen tree) dies with it.
            try? cgroup.kill(timeoutSeconds: 2)
            try? cgroup.remove()
        }
        entry.exit = Self.exit(
            status: statusText.flatMap(SandboxLaunch.parseStatus), waitStatus: waitStatus,
            request: entry.request, oomKills: oomKills, message: entry.requestMessage,
            memoryLimit: oomKills > 0 ? memoryLimitSource(app: entry.app) : "")
        lifecycleEnded(&entry)
        entry.state =
            (try? InstanceLifecycle.transition(from: entry.state, on: .launcherEnded))?.state
            ?? .exited
        entry.endedAt = Date()
        denials.ended(instance: id)
        entry.watcher = nil
        let waiters = entry.waiters
        entry.waiters = [:]
        save(entry)
        publish(.exited, entry.api)
        // Waiters hear of the exit once tmp is emptied: what they see next is the app at rest.
        if let emptying = emptyTemporaryAfterExit(appID: entry.app, instance: id) {
            let api = entry.api
            Task {
                await emptying.value
                for waiter in waiters.values { waiter.resume(returning: api) }
            }
        } else {
            for waiter in waiters.values { waiter.resume(returning: entry.api) }
        }
        pruneExited()
        spawner.instanceEnded()
        keepAliveAfterExit(entry.api)
    }

    /// Reaps a launcher this daemon started, without waiting: through its pidfd, so that it
    /// can never reap (or block the actor on) another process that took the pid. Without a
    /// pidfd (pidfd_open failed) the pid is still the launcher's: only this daemon reaps its
    /// launchers, and a zombie keeps its pid until then.
    nonisolated static func reap(_ entry: Instance) -> Int32? {
        var raw: Int32 = 0
        if let watcher = entry.watcher {
            return appd_pidfd_reap(watcher.pidfd, &raw) == 1 ? raw : nil
        }
        guard let pid = entry.pid else { return nil }
        return retryingInterrupts({ waitpid(pid, &raw, WNOHANG) }) == pid ? raw : nil
    }

    /// The setting that set an instance's memory limit, for the OOM message: the app's own
    /// `[App ID]` override when it has one, else `[Sandbox]`. A reload applies a changed limit to
    /// running instances (Supervisor+Settings), so the current settings are the ones in force.
    func memoryLimitSource(app: AppID) -> String {
        let config = configuration.current
        if let value = config.override(for: app)?.sandboxValue("MemoryMax") {
            return "MemoryMax=\(value) of [App \(app)] in appd.conf"
        }
        return "MemoryMax=\(config.sandbox.memoryMax) of [Sandbox] in appd.conf"
    }

    /// Why it ended. What appd asked for comes first (it explains a SIGKILL or SIGTERM), then
    /// the OOM killer (naming `memoryLimit`, the setting that set the limit), then what the
    /// launcher wrote.
    static func exit(
        status: AppExitStatus?, waitStatus: Int32?, request: Instance.Request?, oomKills: Int64,
        message: String? = nil,
        memoryLimit: String
    ) -> APIExit {
        let status = status ?? waitStatus.map { SandboxLaunch.status(line: "", waitStatus: $0) }
        var code: Int32?
        var signal: Int32?
        switch status {
        case .exited(let value)?: code = value
        case .signaled(let value)?: signal = value
        case .failedToLaunch(let message)?:
            return APIExit(reason: .failedToLaunch, message: message)
        case nil: break
        }
        switch request {
        case .kill?: return APIExit(reason: .killed, code: code, signal: signal ?? SIGKILL)
        case .killAfterGrace?:
            return APIExit(reason: .killedAfterGrace, code: code, signal: signal ?? SIGKILL)
        case .terminate?: return APIExit(reason: .terminated, code: code, signal: signal)
        case .launchWatchdog?:
            return APIExit(
                reason: .launchWatchdog, code: code, signal: signal ?? SIGKILL, message: message)
        case .backgroundTaskExpired?:
            return APIExit(
                reason: .backgroundTaskExpired, code: code, signal: signal ?? SIGKILL,
                message: message)
        case .jetsam?:
            return APIExit(reason: .jetsam, code: code, signal: signal ?? SIGKILL, message: message)
        case nil: break
        }
        if oomKills > 0 {
            return APIExit(
                reason: .outOfMemory, code: code, signal: signal,
                message:
                    "the OOM killer ended \(oomKills) process(es) of its cgroup (its limit: \(memoryLimit))"
            )
        }
        if let code { return APIExit(reason: .exited, code: code) }
        if let signal { return APIExit(reason: .signaled, signal: signal) }
        return APIExit(
            reason: .lost,
            message: "the launcher ended while appd was not running and wrote no status")
    }

    /// Forgets the oldest exited instances beyond `KeepExited`, with their records and logs.
    func pruneExited() {
        let exited = table.entries.values.filter { $0.state == .exited }
            .sorted { ($0.endedAt ?? .distantPast) < ($1.endedAt ?? .distantPast) }
        guard exited.count > settings.keepExited else { return }
        for entry in exited.prefix(exited.count - settings.keepExited) {
            let id = entry.id
            table.entries[id] = nil
            records.remove(id)
            logs.remove(entry.log)
        }
    }

    /// Seconds between two sweeps of `checkExits`. Exits arrive through the event loop
    /// (KernelEvents); the sweep only backs it up, so it is rare: with 1,000 instances it costs
    /// 100 pidfd polls a second.
    static let exitSweepInterval: Double = 10

    /// Handles exits whose pidfd became readable without the event loop reporting them (it
    /// never should: each one is published as a message, so that a test or an admin sees it).
    /// It reads no output: the instances' relays write their logs (docs/app-output.md).
    func checkExits() {
        for entry in table.entries.values where entry.state != .exited {
            if entry.watcher?.hasExited == true {
                // Readable, yet the loop has not taken the event: it may be on its way (an exit
                // in the last instant), or lost. launcherEnded runs once, whichever comes first.
                publish(.message, entry.api, detail: "exit found by the sweep, not the event loop")
                launcherEnded(entry.id)
            }
        }
    }

    /// Each instance launched from now on sends its output to journald's native socket at
    /// `path` as well as to its log file, through its relay. Call before `start()`.
    public func forwardOutput(toJournal path: String) {
        journalSocket = path
    }

    /// A datagram socket connected to the journal (so that the relay can wait for room with
    /// poll), or nil when there is no journal to connect to: the log file still has everything.
    static func connectJournal(_ path: String) -> Int32? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            return nil
        }
        return fd
    }
}
