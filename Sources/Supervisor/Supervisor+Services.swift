import AppContainers
import AppdAPI
import AppdBase
import AppdConfig
import Foundation

/// Who asked for a launch: a client, or appd itself running an app as a service.
public enum LaunchOrigin: Sendable {
    case client
    /// `RunAtLoad=yes` when appd started.
    case runAtLoad
    /// A `KeepAlive=` restart.
    case keepAlive
    /// `StartInterval=` or `StartCalendarInterval=` (Supervisor+Schedule.swift).
    case scheduled

    /// The key that asked for it, in events.
    var label: String {
        switch self {
        case .client: "launch"
        case .runAtLoad: "RunAtLoad"
        case .keepAlive: "KeepAlive"
        case .scheduled: "schedule"
        }
    }
}

/// What appd remembers of an app it runs as a service (docs/lifecycle.md, "Services"): its
/// KeepAlive restarts in a row, the next one, and how the last instance ended. In memory only:
/// a daemon that restarts re-adopts the running instances and starts counting again.
struct ServiceRun {
    var restarts = 0
    var nextTry: Date?
    /// `KeepAliveLimit` restarts in a row, each run shorter than `KeepAliveStableTime`.
    var gaveUp = false
    var lastExit: APIExit?
    /// Bumped by every scheduled restart and every launch by a client: a restart whose number
    /// is no longer the last one does nothing.
    var generation = 0
}

/// The service keeper: the KeepAlive decisions for every app run as a service (restart after
/// the backoff, or give up at `KeepAliveLimit`). It decides; the actor acts on the decision
/// (schedules the restart, launches, publishes the notice).
struct ServiceKeeper {
    private(set) var runs: [AppID: ServiceRun] = [:]

    enum Decision: Equatable {
        /// An end KeepAlive does not restart: one appd was asked for, or a clean exit under
        /// `on-failure`.
        case notRestarted
        /// `KeepAliveLimit` restarts in a row: appd gives up until a client launches the app.
        case gaveUp(restarts: Int)
        /// Restart number `attempt` after `delay` seconds; `generation` names it (`due`).
        case restart(attempt: Int, delay: Double, generation: Int)
    }

    func run(_ app: AppID) -> ServiceRun { runs[app] ?? ServiceRun() }

    /// The last instance of `app` ended after running `ran` seconds.
    mutating func ended(
        _ app: AppID, exit: APIExit?, ran: Double, mode: ServiceSettings.KeepAlive,
        lifecycle: LifecycleSettings, now: Date = Date()
    ) -> Decision {
        var run = run(app)
        run.lastExit = exit
        run.nextTry = nil
        defer { runs[app] = run }
        guard Self.restarts(exit, mode: mode) else { return .notRestarted }
        if ran >= lifecycle.keepAliveStableTime { run.restarts = 0 }
        guard run.restarts < lifecycle.keepAliveLimit else {
            run.gaveUp = true
            return .gaveUp(restarts: run.restarts)
        }
        return Self.schedule(&run, lifecycle: lifecycle, now: now)
    }

    /// appd's own launch of `app` (RunAtLoad, a restart) failed: it counts as a failed run.
    mutating func launchFailed(
        _ app: AppID, error: String, lifecycle: LifecycleSettings, now: Date = Date()
    ) -> Decision {
        var run = run(app)
        run.lastExit = APIExit(reason: .failedToLaunch, message: error)
        defer { runs[app] = run }
        guard run.restarts < lifecycle.keepAliveLimit else {
            run.gaveUp = true
            run.nextTry = nil
            return .gaveUp(restarts: run.restarts)
        }
        return Self.schedule(&run, lifecycle: lifecycle, now: now)
    }

    private static func schedule(
        _ run: inout ServiceRun, lifecycle: LifecycleSettings, now: Date
    ) -> Decision {
        run.restarts += 1
        run.gaveUp = false
        run.generation &+= 1
        let delay = lifecycle.keepAliveDelay(attempt: run.restarts)
        run.nextTry = now.addingTimeInterval(delay)
        return .restart(attempt: run.restarts, delay: delay, generation: run.generation)
    }

    /// Restart `generation` of `app` is due: whether it is still the last one scheduled (then
    /// it is taken, and no other will be).
    mutating func due(_ app: AppID, generation: Int) -> Bool {
        guard var run = runs[app], run.generation == generation, run.nextTry != nil else {
            return false
        }
        run.nextTry = nil
        runs[app] = run
        return true
    }

    /// A client launched the app: a crash loop is over, a scheduled restart is dropped.
    mutating func clientLaunched(_ app: AppID) {
        guard var run = runs[app] else { return }
        run.restarts = 0
        run.gaveUp = false
        run.nextTry = nil
        run.generation &+= 1
        runs[app] = run
    }

    /// Which ends KeepAlive restarts: never one appd was asked for (terminate, kill, restart);
    /// with `on-failure`, not an exit with code 0 either.
    static func restarts(_ exit: APIExit?, mode: ServiceSettings.KeepAlive) -> Bool {
        switch exit?.reason {
        case .terminated?, .killedAfterGrace?, .killed?: false
        case .exited?: mode == .yes || exit?.code != 0
        default: mode != .no
        }
    }
}

extension Supervisor {
    // MARK: RunAtLoad

    /// Launches every installed app whose `[App ID]` says `RunAtLoad=yes` and that has no
    /// running instance (one re-adopted from the previous daemon counts): called once by
    /// `start()`, after adoption.
    func runAtLoad() {
        for (key, override) in configuration.current.apps.sorted(by: { $0.key < $1.key })
        where override.service.runAtLoad {
            guard listed(app: key).instances.isEmpty, table.launches(of: key) == 0 else { continue }
            guard let app = try? catalog.app(key.spelling) else {
                hub.publish { seq in
                    APIEvent(
                        seq: seq, time: Date(), kind: .message, app: key.spelling,
                        detail: "RunAtLoad: not started: \(key) is not installed")
                }
                continue
            }
            launchService(app.appID, origin: .runAtLoad, generation: nil)
        }
    }

    // MARK: KeepAlive

    /// An instance has ended: with `KeepAlive=` and no other instance of its app running, a
    /// restart is scheduled after the backoff, or appd gives up at `KeepAliveLimit`.
    func keepAliveAfterExit(_ instance: APIInstance) {
        let app = AppID(instance.app)
        guard !stopping, let override = configuration.current.override(for: app),
            override.service.keepAlive != .no
        else { return }
        guard listed(app: app).instances.isEmpty else { return }
        let ran = (instance.endedAt ?? Date()).timeIntervalSince(instance.startedAt)
        let mode = override.service.keepAlive
        switch keeper.ended(
            app, exit: instance.exit, ran: ran, mode: mode, lifecycle: lifecycle)
        {
        case .notRestarted:
            notice(
                app,
                "KeepAlive=\(mode.rawValue): not restarted (\(instance.exit?.description ?? "ended"))"
            )
        case .gaveUp(let restarts):
            notice(
                app,
                "KeepAlive: crash loop: gave up after \(restarts) restarts in a row, each run shorter than KeepAliveStableTime=\(Self.seconds(lifecycle.keepAliveStableTime)) (KeepAliveLimit=\(lifecycle.keepAliveLimit)); appctl launch \(app) starts it again"
            )
        case .restart(let attempt, let delay, let generation):
            restartLater(
                app, attempt: attempt, delay: delay, generation: generation,
                after: instance.exit?.description ?? "ended")
        }
    }

    private func restartLater(
        _ app: AppID, attempt: Int, delay: Double, generation: Int, after what: String
    ) {
        notice(
            app,
            "KeepAlive: restart \(attempt) of \(lifecycle.keepAliveLimit) in \(Self.seconds(delay)) (\(what))"
        )
        Task {
            try? await Task.sleep(nanoseconds: UInt64(delay * 1e9))
            self.keepAliveDue(app, generation: generation)
        }
    }

    private func keepAliveDue(_ app: AppID, generation: Int) {
        guard !stopping, keeper.due(app, generation: generation) else { return }
        // Started meanwhile, or being started (a client's launch, RunAtLoad, an adopted
        // instance): nothing to do.
        guard listed(app: app).instances.isEmpty, table.launches(of: app) == 0,
            configuration.current.override(for: app)?.service.keepAlive ?? .no != .no
        else { return }
        launchService(app, origin: .keepAlive, generation: generation)
    }

    /// Launches `app` as appd itself (caller uid 0) with its `Arguments=`; a launch that fails
    /// counts as a failed run for KeepAlive.
    func launchService(_ app: AppID, origin: LaunchOrigin, generation: Int?) {
        let arguments = configuration.current.override(for: app)?.service.arguments ?? []
        Task {
            do {
                let instance = try await self.launchTimed(
                    app, arguments: arguments, caller: 0, background: true, origin: origin
                )
                .instance
                self.notice(
                    app,
                    "\(origin.label): started instance \(instance.id)"
                )
            } catch {
                self.serviceLaunchFailed(app, origin: origin, error: error)
            }
        }
    }

    private func serviceLaunchFailed(_ app: AppID, origin: LaunchOrigin, error: any Error) {
        notice(app, "\(origin.label): launch failed: \(error)")
        guard !stopping, let override = configuration.current.override(for: app),
            override.service.keepAlive != .no,
            listed(app: app).instances.isEmpty
        else { return }
        switch keeper.launchFailed(app, error: "\(error)", lifecycle: lifecycle) {
        case .notRestarted: break
        case .gaveUp(let restarts):
            notice(
                app,
                "KeepAlive: crash loop: gave up after \(restarts) failed restarts in a row (KeepAliveLimit=\(lifecycle.keepAliveLimit))"
            )
        case .restart(let attempt, let delay, let generation):
            restartLater(
                app, attempt: attempt, delay: delay, generation: generation,
                after: "launch failed")
        }
    }

    /// A client launched the app: a crash loop is over, a scheduled restart is dropped.
    func serviceLaunched(_ app: AppID) { keeper.clientLaunched(app) }

    func notice(_ app: AppID, _ detail: String) {
        hub.publish { seq in
            APIEvent(seq: seq, time: Date(), kind: .message, app: app.spelling, detail: detail)
        }
    }

    // MARK: Queries

    /// Every app whose `[App ID]` sets RunAtLoad, KeepAlive or a schedule, installed or not.
    public func services() -> [APIService] {
        configuration.current.apps.keys.sorted().compactMap { service($0) }
    }

    /// How appd runs `app` as a service; nil when its `[App ID]` sets neither RunAtLoad nor
    /// KeepAlive.
    public func service(_ app: AppID) -> APIService? {
        guard let override = configuration.current.override(for: app),
            override.service.runAtLoad || override.service.keepAlive != .no
                || override.service.isScheduled
        else { return nil }
        let run = keeper.run(app)
        let live = listed(app: app).instances
        let state: APIService.State =
            !live.isEmpty
            ? .running : run.gaveUp ? .crashLoop : run.nextTry != nil ? .waiting : .stopped
        let name = live.first?.app ?? (try? catalog.app(app.spelling).bundleID) ?? app.spelling
        return APIService(
            app: name, state: state, runAtLoad: override.service.runAtLoad,
            keepAlive: override.service.keepAlive.rawValue, arguments: override.service.arguments,
            instances: live.map(\.id), restarts: run.restarts,
            restartLimit: lifecycle.keepAliveLimit,
            nextTry: live.isEmpty ? run.nextTry : nil, lastExit: run.lastExit,
            nextRun: nextScheduledRun(app), lastRun: scheduled.runs[app]?.last)
    }

    // MARK: Restart and upgrades

    /// Terminates the instance with the grace period (at once if it has exited), waits for its
    /// end, and launches its app again with the same arguments, into the same place (the
    /// background, when it was there or is a service). Returns the new instance.
    public func restart(_ id: String, grace: Double? = nil, caller: UInt32) async throws
        -> APIInstance
    {
        let old = try entry(id).api
        if old.state != .exited {
            _ = try terminate(old.id, grace: grace)
            let ended = try await waitForExit(old.id)
            guard ended.state == .exited else {
                throw AppdError(
                    .conflict,
                    "appd is stopping; instance \(old.id) is still \(ended.state.rawValue)",
                    hint: "launch it again once appd is back")
            }
        }
        let background = old.service == true || [.background, .suspended].contains(old.state)
        return try await launchTimed(
            AppID(old.app), arguments: old.arguments, caller: caller, background: background
        ).instance
    }

    /// Another bundle of `app` was installed: its running instances launched from an older one
    /// are marked `outdated` (`appctl ps` shows it; `appd install --restart` restarts them).
    public func appInstalled(_ app: InstalledApp) {
        for var entry in table.entries.values
        where entry.state != .exited
            && entry.app.matches(app.bundleID)
            && entry.outdated != true
            && entry.bundle != nil && entry.bundle != app.bundleUUID
        {
            entry.outdated = true
            save(entry)
            publish(
                .message, entry.api,
                detail:
                    "outdated: runs version \(entry.version ?? "?"), \(app.version ?? "?") is installed"
            )
        }
    }

    /// After adoption: an instance whose app was upgraded while no daemon ran is outdated too.
    func markOutdatedAdopted() {
        let apps = Set(table.entries.values.filter { $0.state != .exited }.map(\.app))
        for app in apps.sorted() {
            if let installed = try? catalog.app(app.spelling) { appInstalled(installed) }
        }
    }
}
