import AppBundle
import AppContainers
import AppdAPI
import AppdBase
import CLinux
import Foundation
import Glibc
import LifecycleProtocol
import Sandbox
import Synchronization

/// How long each stage of a launch took on the daemon's side, in seconds: what the API answers
/// in its `Server-Timing` header and scripts/bench-launch prints as the launch's breakdown.
public struct LaunchTimings: StageTimings, Sendable, Equatable {
    /// Loading the app from the registry.
    public var app: Double = 0
    /// The launch-time bundle check (a fingerprint of the bundle container, or its hash).
    public var check: Double = 0
    /// Compiling the sandbox profile and its seccomp filter (cached per rule set).
    public var profile: Double = 0
    /// The instance record, the output pipe, the log folder, the status file, the channel.
    public var files: Double = 0
    /// The instance cgroup, the memfds and posix_spawn of appd-exec.
    public var spawn: Double = 0
    /// On the Supervisor actor: waiting for it, then recording the instance and its state.
    public var record: Double = 0

    public init() {}

    /// Each stage's name and seconds, in order.
    public var stages: [(name: String, seconds: Double)] {
        [
            ("app", app), ("check", check), ("profile", profile), ("files", files),
            ("spawn", spawn), ("record", record),
        ]
    }
}

extension Supervisor {
    /// A launcher spawned off the actor, still to be recorded on it.
    struct SpawnedInstance: Sendable {
        var instance: Instance
        var started: SandboxLaunch.Started
        var channel: Int32
        var modes: [String]
        var app: InstalledApp
        /// The stages so far (app, check, profile, files, spawn).
        var timings: LaunchTimings
    }

    public func launch(
        _ appID: AppID, arguments: [String], caller: UInt32, background: Bool = false
    ) async throws
        -> APIInstance
    {
        try await launchTimed(appID, arguments: arguments, caller: caller, background: background)
            .instance
    }

    /// Launches an instance. Only admission and the bookkeeping run on the actor: loading the
    /// app, checking its bundle, compiling its profile, creating files and the cgroup and
    /// spawning the launcher happen off it, so that launches run side by side (and a slow one,
    /// a big bundle to hash, holds up no other request). Until it is recorded, a launch counts
    /// in `launching`: an uninstall waits for no launch, it refuses while one is under way.
    public func launchTimed(
        _ appID: AppID, arguments: [String], caller: UInt32, background: Bool = false,
        origin: LaunchOrigin = .client
    )
        async throws -> (instance: APIInstance, timings: LaunchTimings)
    {
        // A launch that names no arguments gets the admin's `Arguments=`, if any.
        let arguments =
            arguments.isEmpty
            ? configuration.current.override(for: appID)?.service.arguments ?? [] : arguments
        // No suspension from here until `launching` counts this launch.
        await waitForTemporaryEmptying(appID)
        guard !closedApps.contains(appID) else {
            throw AppdError(.conflict, "\(appID) is being uninstalled")
        }
        try admitLaunch(appID, caller: caller)
        emptyTemporaryBeforeLaunch(appID: appID)
        table.launchStarted(app: appID, by: caller)
        defer { table.launchEnded(app: appID, by: caller) }
        let spawned = try await Self.spawnInstance(
            appID, arguments: arguments, caller: caller, with: launchDependencies)
        var timings = spawned.timings
        var recording = Laps()
        launchedApps[appID] = spawned.app
        var entry = spawned.instance
        // The modes the admin allows ([Lifecycle] AllowedBackgroundModes), narrowed by the
        // app's [App ID] BackgroundModes.
        let allowed = spawned.modes.filter(lifecycle.allowedBackgroundModes.contains)
        let override = configuration.current.override(for: entry.app)
        entry.backgroundModes = override?.narrowedBackgroundModes(allowed) ?? allowed
        // `BackgroundModes=` empty (appd override --no-background): nothing keeps it running in
        // the background, LSBackgroundOnly neither; it is an ordinary app.
        if override?.backgroundModes == [] { entry.service = nil }
        entry.cgroup = spawned.started.cgroup
        entry.nextFetch = nextFetch(entry.app)
        entry.isChild = true
        if origin == .client { serviceLaunched(entry.app) }
        if stopping {
            // appd stops: nobody watches any more; the record lets the next daemon adopt it.
            try? records.save(entry)
            close(spawned.channel)
            table.entries[entry.id] = entry
            timings.record = recording.lap()
            return (entry.api, timings)
        }
        recordRevokedEntitlements(spawned.app, instance: entry.id)
        entry.watcher = watch(id: entry.id, pid: spawned.started.pid)
        entry.life.channel = openChannel(id: entry.id, fd: spawned.channel)
        table.entries[entry.id] = entry
        publish(.launched, entry.api)
        // Its first state change saves the record, with the pid and the background modes.
        let instance = try launched(entry.id, background: background)
        timings.record = recording.lap()
        launchRecorded(entry.app)
        return (instance, timings)
    }

    /// The `[Supervisor]` caps on live instances (docs/api.md, "Limits"): each holds daemon
    /// fds (its pidfd and lifecycle channel), and a user with the control right must not be able
    /// to take them all. Launches under way count as live. root is never refused: its instances
    /// count toward MaxInstances, and no cap applies to it. Runs on the actor, so two launches
    /// cannot both take the last place.
    func admitLaunch(_ appID: AppID, caller: UInt32) throws {
        guard caller != 0 else { return }
        let (total, own, app) = table.liveCounts(app: appID, caller: caller)
        if total >= settings.maxInstances {
            throw AppdError(
                .unavailable,
                "appd runs \(total) instances, its limit ([Supervisor] MaxInstances=\(settings.maxInstances))",
                hint:
                    "try again once some have ended; an admin can raise MaxInstances (a restart applies it, and sizes appd's file descriptors)"
            )
        }
        if own >= settings.maxInstancesPerUser {
            throw AppdError(
                .tooManyRequests,
                "uid \(caller) has \(own) instances running or starting, the most one user may ([Supervisor] MaxInstancesPerUser=\(settings.maxInstancesPerUser))",
                hint: "terminate some (appctl ps, appctl terminate) and try again")
        }
        if app >= settings.maxInstancesPerApp {
            throw AppdError(
                .tooManyRequests,
                "\(appID) has \(app) instances running or starting, the most one app may ([Supervisor] MaxInstancesPerApp=\(settings.maxInstancesPerApp))",
                hint: "terminate some of its instances and try again")
        }
    }

    /// Everything of a launch that does not touch the actor's state: runs on the global
    /// executor, many at once. On failure nothing is left (no record, no cgroup, no fd).
    nonisolated static func spawnInstance(
        _ appID: AppID, arguments: [String], caller: UInt32, with dependencies: LaunchDependencies
    ) async throws -> SpawnedInstance {
        try spawnInstance(
            appID, arguments: arguments, caller: caller, spawner: dependencies.spawner,
            with: dependencies)
    }

    /// The same with the spawner's own type, which ties its plan to its start.
    private nonisolated static func spawnInstance<Spawner: InstanceSpawner>(
        _ appID: AppID, arguments: [String], caller: UInt32, spawner: Spawner,
        with dependencies: LaunchDependencies
    ) throws -> SpawnedInstance {
        let (catalog, records, logs, denials) = (
            dependencies.catalog, dependencies.records, dependencies.logs, dependencies.denials
        )
        var timings = LaunchTimings()
        var laps = Laps()
        let app = try catalog.app(appID.spelling)
        timings.app = laps.lap()
        let plan: Spawner.Plan
        do {
            try catalog.checkInstalledBundle(app)
            timings.check = laps.lap()
            plan = try spawner.plan(
                app, arguments: arguments, logDenials: dependencies.logDenials)
        } catch {
            // appd's own refusal: the admin sees it next to the kernel's.
            denials.record(
                app: app.appID, instance: nil, source: .appd, what: "launch", detail: "\(error)")
            throw error
        }
        timings.profile = laps.lap()
        let info = catalog.launchInfo(of: app)
        let id = newInstanceID()
        var instance = Instance(
            id: id, app: app.appID, uid: app.uid, arguments: arguments, launchedBy: caller,
            startedAt: Date(), log: logs.path(app: app.bundleID, instance: id), state: .launching)
        instance.channel = .silent
        instance.service = info.backgroundOnly ? true : nil
        instance.version = app.version
        instance.bundle = app.bundleUUID
        // The record exists before the process does: a crash in between leaves a record
        // without a pid, which the next start closes as failed, and a cgroup it removes.
        try records.save(instance)
        // The app's stdout and stderr are a pipe whose read end goes to the launcher's output
        // relay (docs/app-output.md): the daemon never reads it and the app never holds a file.
        var opened: [Int32] = []
        defer { for fd in opened { close(fd) } }
        let files: LaunchFiles
        let channel: (daemon: Int32, app: Int32)
        do {
            let made = try openFiles(app: app, instance: id, with: dependencies, opened: &opened)
            files = made.files
            channel = made.channel
        } catch {
            records.remove(id)
            throw error
        }
        timings.files = laps.lap()
        let started: SandboxLaunch.Started
        // Registered before the launcher starts: an app quicker than the launch's return
        // (a denial at its first instruction) is not missed.
        denials.register(instance: id, app: app.appID, uid: app.uid, cgroups: [])
        do {
            started = try spawner.start(plan, app: app, instance: id, files: files)
        } catch {
            denials.forget(instance: id)
            close(channel.daemon)
            records.remove(id)
            logs.remove(instance.log)
            throw error
        }
        instance.pid = started.pid
        instance.state =
            (try? InstanceLifecycle.transition(from: instance.state, on: .spawned))?.state
            ?? .inactive
        instance.stateSince = Date()
        instance.cgroupPath = started.cgroup.directories.first
        instance.pidStartTime = ProcessInfoReader.startTime(of: started.pid)
        denials.setCgroups(
            instance: id, cgroups: started.cgroup.directories, launcherPid: started.pid)
        if let counter = started.bindCounter {
            denials.watch(.bind, instance: id, counter: counter)
        }
        if let counter = started.loopbackCounter {
            denials.watch(.loopback, instance: id, counter: counter)
        }
        timings.spawn = laps.lap()
        return SpawnedInstance(
            instance: instance, started: started, channel: channel.daemon,
            modes: info.backgroundModes, app: app, timings: timings)
    }

    /// The launch's descriptors (LaunchFiles) and the daemon's end of the lifecycle channel;
    /// each one opened is added to `opened`, which the caller closes once the launcher has
    /// them (or the launch failed).
    private nonisolated static func openFiles(
        app: InstalledApp, instance id: String, with dependencies: LaunchDependencies,
        opened: inout [Int32]
    ) throws -> (files: LaunchFiles, channel: (daemon: Int32, app: Int32)) {
        let folder = try dependencies.logs.openFolder(app: app.bundleID)
        opened.append(folder)
        let status = try dependencies.records.openStatus(id)
        opened.append(status)
        let channel = try LifecycleChannel.pair()
        opened.append(channel.app)
        let journal = dependencies.journalSocket.flatMap(connectJournal)
        if let journal { opened.append(journal) }
        let files = LaunchFiles(
            logFolder: folder,
            logName: "\(id).log", logMaxBytes: dependencies.logMaxBytes, journal: journal,
            journalFields: [
                "SYSLOG_IDENTIFIER=\(app.bundleID)", "APPD_APP=\(app.bundleID)",
                "APPD_INSTANCE=\(id)", "APPD_UID=\(app.uid)",
            ], status: status, channel: channel.app)
        return (files, channel)
    }
}
