import AppBundle
import AppContainers
import AppdAPI
import AppdBase
import AppdConfig
import CLinux
import Foundation
import Glibc
import LauncherProtocol
import Sandbox

/// The running instances of every app: launches them through `appd-exec`, each in its own
/// cgroup, learns of their end through pidfds, suspends (freezer), resumes, terminates with a
/// grace period, and keeps a record of each under the runtime directory so that a daemon
/// started after a crash re-adopts them (Supervisor+Adopt.swift).
///
/// Its collaborators come in by injection, each behind a protocol: the registry of apps
/// (`AppCatalog`, the daemon's AppStore), the sandbox end of a launch (`InstanceSpawner`,
/// appd-exec) and the cgroups (`CgroupDriver`, whose instance cgroups freeze, thaw, kill and
/// report memory). SupervisorTests runs it with fakes of all three, without root.
public actor Supervisor {
    let catalog: any AppCatalog
    /// Checks, profiles and starts each launch's launcher (InstanceSpawner.swift).
    let spawner: any InstanceSpawner
    /// The settings in force (the daemon owns them; a reload swaps them whole).
    let configuration: LiveConfiguration
    /// `[Supervisor]` and `[Sandbox] Launcher=` as last (re)loaded (Supervisor+Settings.swift).
    var settings: SupervisorSettings
    let driver: any CgroupDriver
    let records: RecordStore
    let logs: InstanceLogs
    let hub: EventHub
    /// What the sandbox and appd refused each app (DenialLog.swift), and the kernel's side of it.
    public nonisolated let denials: DenialLog
    let auditReader: AuditReader
    let exitQueue = DispatchQueue(label: "appd.supervisor.exits")
    /// The one thread that waits for the kernel: launcher pidfds, memory-pressure triggers.
    let kernelEvents: KernelEvents

    /// Every instance, and the launches under way (InstanceTable.swift).
    var table = InstanceTable()
    /// The last token `waitForExit` handed out.
    var lastWaiter: UInt64 = 0
    /// Whether launches ask the kernel to audit their denials (Supervisor+Denials.swift); off
    /// until the denial log starts.
    var logDenials = false
    /// Apps being uninstalled: no launch until that is over.
    var closedApps: Set<AppID> = []
    /// Emptyings of an app's tmp after its last exit: its next launch waits for them
    /// (Supervisor+Temporary.swift).
    var emptyingTemporary: [AppID: Task<Void, Never>] = [:]
    /// Apps whose tmp this daemon emptied after their last exit, with no launch since: their
    /// next launch has nothing to empty and reads nothing to know it.
    var temporaryAtRest: Set<AppID> = []
    /// The installed app each app's latest launch ran: its instances' exits empty that data
    /// container's tmp without asking the registry again.
    var launchedApps: [AppID: InstalledApp] = [:]
    /// The run of Caches reclaiming under way (Supervisor+Caches.swift): one at a time.
    var reclaimRun: Task<Void, Never>?
    /// What reclaiming Caches did, for the metrics and the journal.
    public nonisolated let cacheReclaims = CacheReclaims()
    /// journald's native socket: each instance's relay sends its output there too (under
    /// systemd); nil: the log files only.
    var journalSocket: String?
    /// `shutdown()` ran: nobody is told of exits any more, so nobody may wait for one.
    var stopping = false
    /// Memory pressure seen so far (Jetsam.swift).
    var jetsam = JetsamState()
    /// CPU seconds of ended instances per app (Supervisor+Usage.swift, the metrics).
    var endedCPU: [AppID: Double] = [:]
    /// The apps run as services: their KeepAlive restarts (ServiceKeeper, Supervisor+Services).
    var keeper = ServiceKeeper()
    /// The lifecycle channels' reads, on one queue like the exit watchers.
    let channelQueue = DispatchQueue(label: "appd.supervisor.channels")
    /// The state root: the background fetch schedule is kept there (Supervisor+Fetch.swift).
    let stateRoot: String
    /// Scheduled services: their last runs (Supervisor+Schedule.swift).
    var scheduled = ServiceSchedule()
    var scheduleTimer = 0
    /// Background fetch: the schedule, the timer (Supervisor+Fetch.swift).
    var fetches = FetchState()
    /// Background fetches by app and result, for the metrics.
    public nonisolated let fetchCounts = FetchCounts()

    /// `catalog` and `spawner` are the apps and the launches (the daemon's: its AppStore and a
    /// `SandboxSpawner` on `driver`, which `Supervisor.cgroupDriver` makes and prepares); the
    /// instance records go under `runtimeDirectory`, the logs under `stateRoot`'s `logs`.
    public init(
        catalog: any AppCatalog, spawner: any InstanceSpawner, driver: any CgroupDriver,
        configuration: LiveConfiguration, runtimeDirectory: String, stateRoot: String
    ) throws {
        self.catalog = catalog
        self.spawner = spawner
        self.driver = driver
        self.configuration = configuration
        self.stateRoot = stateRoot
        hub = EventHub()
        denials = DenialLog(hub: hub)
        auditReader = AuditReader(log: denials)
        settings = configuration.current.supervisor
        records = try RecordStore(runtimeDirectory: runtimeDirectory)
        logs = try InstanceLogs(stateRoot: stateRoot, maxBytes: settings.logMaxBytes)
        kernelEvents = try KernelEvents()
    }

    /// The cgroup driver for `[Supervisor] CgroupParent=` (or the default parent for the host's
    /// layout and whether systemd runs appd), its parent prepared.
    public static func cgroupDriver(_ settings: SupervisorSettings, underSystemd: Bool) throws
        -> any CgroupDriver
    {
        let layout = CgroupLayout.detect()
        let parent =
            settings.cgroupParent.isEmpty
            ? Cgroups.defaultParent(layout: layout, underSystemd: underSystemd)
            : settings.cgroupParent
        let driver = try Cgroups.driver(layout: layout, settings: CgroupSettings(parent: parent))
        try driver.prepare()
        return driver
    }

    // MARK: Launch (Supervisor+Launch.swift)

    static func newInstanceID() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<6).map { _ in
            String(format: "%02x", UInt8.random(in: 0...255, using: &generator))
        }.joined()
    }

    func watch(id: String, pid: pid_t) -> ExitWatcher? {
        let watcher = ExitWatcher(pid: pid, events: kernelEvents, queue: exitQueue) { [weak self] in
            guard let self else { return }
            Task { await self.launcherEnded(id) }
        }
        if watcher == nil {
            // Gone before we could watch it.
            Task { self.launcherEnded(id) }
        }
        return watcher
    }

    /// Runs `body` (an uninstall) only if no instance of `app` is running, and keeps new
    /// launches of it out until `body` is done.
    public func whileNotRunning<T: Sendable>(
        _ app: AppID, _ body: @Sendable () async throws -> T
    ) async throws -> T {
        try await whileNotRunning([app], body)
    }

    /// The same for several apps at once (a restore with `--groups`: the app and every app
    /// sharing its groups): none may run, and none is launched until `body` is done.
    public func whileNotRunning<T: Sendable>(
        _ appIDs: [AppID], _ body: @Sendable () async throws -> T
    ) async throws -> T {
        var apps: [AppID] = []
        for appID in appIDs where !apps.contains(appID) { apps.append(appID) }
        for appID in apps { await waitForTemporaryEmptying(appID) }
        // No suspension from here to the closing: what is checked stays true.
        for appID in apps {
            let running = listed(app: appID).instances
            let count = table.launches(of: appID)
            if running.isEmpty, count > 0 {
                throw AppdError(
                    .conflict, "\(appID) is being launched (\(count) launch(es) under way)",
                    hint: "terminate its instances once they run, then try again")
            }
            guard running.isEmpty else {
                throw AppdError(
                    .conflict,
                    "\(appID) has \(running.count) running instance(s): \(running.map(\.id).joined(separator: ", "))",
                    hint: "terminate them first: appctl terminate \(appID)")
            }
            guard !closedApps.contains(appID) else {
                throw AppdError(.conflict, "\(appID) is already being uninstalled or restored")
            }
        }
        closedApps.formUnion(apps)
        defer { closedApps.subtract(apps) }
        // Nothing of their containers stays held by their shared namespaces.
        for appID in apps { spawner.forget(app: appID) }
        return try await body()
    }

    // MARK: Queries

    public func instances(app: AppID? = nil, includeExited: Bool = false) -> [APIInstance] {
        listed(app: app, includeExited: includeExited).instances.map(withDenials)
    }

    /// The instances as `instances(app:includeExited:)` lists them, with the version of
    /// `entries` they were taken from (the same version, the same answer): GET /v1/instances
    /// encodes each version once. Sorted once per change, not once per request. Their denial
    /// counts are not filled in (`withDenials`, on a cache miss only); `version` changes with
    /// them too.
    public func listed(app: AppID? = nil, includeExited: Bool = false) -> (
        version: ListingVersion, instances: [APIInstance]
    ) {
        let instances = table.listed(app: app, includeExited: includeExited)
        return (ListingVersion(entries: table.version, denials: denials.changes), instances)
    }

    public func instance(_ id: String) throws -> APIInstance { withDenials(try entry(id).api) }

    /// The instance with its denial counts (kept by the denial log, not in the record).
    public nonisolated func withDenials(_ instance: APIInstance) -> APIInstance {
        var instance = instance
        let counts = denials.counts(instance: instance.id)
        instance.denials = counts?.total ?? 0
        instance.denialsDropped = counts?.dropped ?? 0
        return instance
    }

    /// Live instances (of `app`, or all): counted from the cached listing, without the denial
    /// counts `instances` fills in for each.
    public func runningCount(app: AppID? = nil) -> Int { listed(app: app).instances.count }

    func entry(_ id: String) throws -> Instance { try table.entry(id) }

    /// Returns once the instance has exited and its app's tmp emptying (if that exit started
    /// one) is done (at once if both are), or when appd stops: then the
    /// instance is still running. A cancelled wait returns at once with the instance as it is
    /// (still running), and leaves nothing behind: a client that gives up a wait, however
    /// often, costs nothing once it is gone.
    public func waitForExit(_ id: String) async throws -> APIInstance {
        let current = try entry(id)
        let key = current.id
        if stopping { return current.api }
        if current.state == .exited {
            // As for the waiters `launcherEnded` resumes: the app at rest, its tmp emptied.
            await waitForTemporaryEmptying(current.app)
            return table.entries[key]?.api ?? current.api
        }
        lastWaiter &+= 1
        let token = lastWaiter
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                // Runs on the actor, before the caller suspends: a cancellation that came
                // earlier is seen here, a later one finds the token in `waiters`.
                guard !Task.isCancelled, table.entries[key] != nil else {
                    continuation.resume(returning: table.entries[key]?.api ?? current.api)
                    return
                }
                table.entries[key]?.waiters[token] = continuation
            }
        } onCancel: {
            Task { await self.cancelWait(key, token: token) }
        }
    }

    private func cancelWait(_ id: String, token: UInt64) {
        guard let entry = table.entries[id],
            let waiter = table.entries[id]?.waiters.removeValue(forKey: token)
        else { return }
        waiter.resume(returning: entry.api)
    }

    /// Returns when the instance has exited or after `duration`, whichever comes first (a
    /// followed log reads what was written meanwhile, and ends as soon as the instance has).
    public nonisolated func waitForExit(_ id: String, atMost duration: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { _ = try? await self.waitForExit(id) }
            group.addTask { try? await Task.sleep(for: duration) }
            await group.next()
            group.cancelAll()
        }
    }

    /// The log files of an instance, oldest first, whether it has exited, and how much of each
    /// file a reader takes at most (the relay keeps them below it).
    public func logFiles(_ id: String) throws -> (paths: [String], exited: Bool, maxBytes: Int64) {
        let entry = try entry(id)
        let path = entry.log
        return (
            [LogIndexLayout.rotatedName(ofLog: path), path], entry.state == .exited, logs.maxBytes
        )
    }

    public nonisolated func events() -> AsyncStream<APIEvent> { hub.subscribe() }

    /// The events after `start` the daemon still holds (a `gap` event first if some are gone),
    /// then the stream of new ones (`GET /v1/events?since=`).
    public nonisolated func events(after start: EventHub.Start) -> (
        replay: [APIEvent], live: AsyncStream<APIEvent>
    ) {
        hub.subscribe(after: start)
    }

    /// Calls `observer` with every event as it is published (the metrics).
    public nonisolated func observeEvents(_ observer: @escaping @Sendable (APIEvent) -> Void) {
        hub.observe(observer)
    }

    func publish(_ kind: APIEvent.Kind, _ instance: APIInstance, detail: String? = nil) {
        hub.publish { seq in
            APIEvent(
                seq: seq, time: Date(), kind: kind, app: instance.app, instance: instance.id,
                state: instance.state, exit: instance.exit, detail: detail)
        }
    }

    /// Install and uninstall events come from the API layer.
    public nonisolated func publishAppEvent(_ kind: APIEvent.Kind, app: String, version: String?) {
        hub.publish { seq in
            APIEvent(seq: seq, time: Date(), kind: kind, app: app, version: version)
        }
    }

    /// Stops watching; the apps keep running for the next daemon to adopt.
    public func shutdown() {
        stopping = true
        if fetches.writePending { writeFetchSchedule() }
        for entry in table.entries.values { entry.watcher?.cancel() }
        for (id, entry) in table.entries {
            for waiter in entry.waiters.values { waiter.resume(returning: entry.api) }
            table.entries[id]?.waiters = [:]
        }
        hub.finishAll()
    }
}

/// Which instance listing an answer shows: the supervisor's instance table and the denial counts both
/// only grow their counters, so a listing is newer when neither went back.
public struct ListingVersion: Sendable, Equatable {
    public var entries: UInt64
    public var denials: UInt64

    public init(entries: UInt64, denials: UInt64) {
        self.entries = entries
        self.denials = denials
    }

    public func isNewer(than other: ListingVersion) -> Bool {
        self != other && entries >= other.entries && denials >= other.denials
    }
}
