import AppdAPI
import AppdBase
import Foundation
import Glibc
import Sandbox

/// One instance as the supervisor knows it, from its launch to its end: who launched what
/// (fixed at launch), its lifecycle state and how it ended, its launcher process and cgroup,
/// its log, what appd asked of it, and what lives only as long as this daemon (the pidfd
/// watcher, the lifecycle channel and tasks, the waiters). The persisted part is written as an
/// `InstanceRecord` (its own versioned format, InstanceRecord.swift); the API's `APIInstance`
/// is derived from it (`api`), never stored.
///
/// What stays elsewhere, and why: the denial log tracks instances in its own lock
/// (`DenialLog`), because the audit reader's thread attributes kernel records to them off the
/// actor; the shared namespaces are per app, not per instance (`NamespaceTemplates`), and a
/// launch holds its lease only until the launcher has joined them.
struct Instance {
    // MARK: Fixed at launch

    let id: String
    /// The app, as the registry spells it: what the API shows; compared without regard to case.
    let app: AppID
    /// The app's own uid, which its processes run as.
    let uid: UInt32
    let arguments: [String]
    /// The uid of the client that launched it.
    let launchedBy: UInt32
    let startedAt: Date
    /// Its log file (`<state root>/logs/<app>/<id>.log`, InstanceLogs).
    let log: String
    /// The app's version, and the bundle container it was launched from
    /// (InstalledApp.bundleUUID): another one installed since makes it `outdated`.
    var version: String?
    var bundle: String?

    // MARK: Lifecycle (docs/lifecycle.md; the transitions: InstanceLifecycle)

    var state: InstanceState
    var stateSince: Date?
    var lastActiveAt: Date?
    var endedAt: Date?
    var exit: APIExit?
    /// What the app said on its lifecycle channel, if anything.
    var channel: ChannelState?
    var backgroundTasks: Int?
    var backgroundModes: [String]?
    /// LSBackgroundOnly: it runs in the background, never as the active app.
    var service: Bool?
    var outdated: Bool?
    /// The app's next background fetch (the supervisor's schedule, not this record's: filled
    /// in again from it after a restart).
    var nextFetch: Date?
    /// What appd asked of it; decides the exit reason.
    var request: Request?
    /// When the grace period of a terminate runs out.
    var graceDeadline: Date?
    /// Why appd ended it, for the exit's message (jetsam says which budget and why this one).
    var requestMessage: String?

    // MARK: Its process

    /// The launcher (appd-exec), and field 22 of /proc/PID/stat when it was spawned: with the
    /// pid it names one process for the life of the system, so a recycled pid is never mistaken
    /// for it after a restart.
    var pid: pid_t?
    var pidStartTime: UInt64?
    /// The instance cgroup's directory, as recorded.
    var cgroupPath: String?

    // MARK: This daemon's only (not persisted)

    var cgroup: (any InstanceCgroup)?
    var watcher: ExitWatcher?
    /// Our own child (spawned by this daemon): reaped through its pidfd (Supervisor.reap).
    /// Adopted launchers are reaped by init; their status file is all there is.
    var isChild = false
    /// Who waits for its exit, by a token of `waitForExit`'s, so that a waiter that gives up
    /// (its client went away) takes its continuation out again.
    var waiters: [UInt64: CheckedContinuation<APIInstance, Never>] = [:]
    /// The lifecycle channel, background tasks, what the app was told (Supervisor+Lifecycle).
    var life = LifecycleState()
    /// What its last freeze gave back (Supervisor+Reclaim.swift); nil once thawed.
    var memoryReclaim: MemoryReclaim?

    enum Request: String, Codable, Sendable {
        case terminate
        /// The grace period ran out and the cgroup was killed.
        case killAfterGrace
        case kill
        /// Killed by the lifecycle (docs/lifecycle.md): no ready in time, a background task
        /// held too long, memory reclaimed.
        case launchWatchdog
        case backgroundTaskExpired
        case jetsam
    }

    init(
        id: String, app: AppID, uid: UInt32, arguments: [String], launchedBy: UInt32,
        startedAt: Date, log: String, state: InstanceState
    ) {
        self.id = id
        self.app = app
        self.uid = uid
        self.arguments = arguments
        self.launchedBy = launchedBy
        self.startedAt = startedAt
        self.log = log
        self.state = state
    }

    /// The instance as the API shows it (its denial counts are the denial log's, filled in by
    /// `Supervisor.withDenials`).
    var api: APIInstance {
        var instance = APIInstance(
            id: id, app: app.spelling, state: state, pid: pid, uid: uid, arguments: arguments,
            launchedBy: launchedBy, startedAt: startedAt, endedAt: endedAt, exit: exit,
            cgroup: cgroupPath, log: log)
        instance.channel = channel
        instance.backgroundTasks = backgroundTasks
        instance.backgroundModes = backgroundModes
        instance.stateSince = stateSince
        instance.lastActiveAt = lastActiveAt
        instance.service = service
        instance.version = version
        instance.outdated = outdated
        instance.memoryReclaim = memoryReclaim.map {
            APIMemoryReclaim(
                method: $0.method.rawValue, target: $0.target, before: $0.before, after: $0.after,
                milliseconds: ($0.seconds * 1e6).rounded() / 1e3, stopped: $0.stopped)
        }
        instance.nextFetch = nextFetch
        return instance
    }
}
