#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// Where an instance is in its life (docs/lifecycle.md): iOS's states, plus the daemon's own
/// `launching`, `terminating` and `exited`.
public enum InstanceState: String, Codable, Sendable, CaseIterable {
    /// Spawned; the launcher is building the sandbox.
    case launching
    /// Running in the foreground but not the active app: just launched, or on its way between
    /// active and background.
    case inactive
    /// The foreground app (with `[Lifecycle] ActivePolicy=single`, at most one).
    case active
    /// Running, not in the foreground; frozen after `BackgroundGracePeriod` unless it holds a
    /// background task or an allowed `UIBackgroundModes` value.
    case background
    /// Frozen (cgroup freezer): no CPU, no events, until resumed or activated.
    case suspended
    /// Asked to stop: willTerminate and SIGTERM sent, the grace period runs.
    case terminating
    case exited
    /// Daemons before 0.3 said `running` for what is now `inactive`, `active` or `background`.
    /// Never sent by this daemon; a record that still says it is read as `inactive`.
    case running

    /// Its processes run (not frozen, not ended): `inactive`, `active`, `background` (and the
    /// legacy `running`). Old clients' `running` means exactly this.
    public var isRunning: Bool { [.inactive, .active, .background, .running].contains(self) }

    /// Not ended, whatever it is doing.
    public var isLive: Bool { self != .exited }
}

/// Why an instance ended.
public enum ExitReason: String, Codable, Sendable, CaseIterable {
    /// It exited by itself; `code` says how.
    case exited
    /// A signal it did not get from appd killed it; `signal` says which.
    case signaled
    /// Ended after appd's SIGTERM, within the grace period.
    case terminated
    /// Still running when the grace period ran out: its cgroup was killed.
    case killedAfterGrace = "killed-after-grace"
    /// `appctl kill`: its cgroup was killed at once.
    case killed
    /// The kernel's OOM killer ended a process of its cgroup (MemoryMax).
    case outOfMemory = "out-of-memory"
    /// The sandbox could not be built; the app never ran. `message` says why.
    case failedToLaunch = "failed-to-launch"
    /// appd restarted and the instance had ended without its launcher writing a status.
    case lost
    /// It said `hello` on the lifecycle channel but not `ready` within `LaunchWatchdog`: its
    /// cgroup was killed (iOS's 0x8badf00d).
    case launchWatchdog = "launch-watchdog"
    /// It held a background task past its time and the expiration warning: its cgroup was killed.
    case backgroundTaskExpired = "background-task-expired"
    /// Killed to reclaim memory (over `MemoryBudget`, or memory pressure): `message` says why
    /// this one was chosen.
    case jetsam
}

public struct APIExit: Codable, Sendable, Equatable, CustomStringConvertible {
    public var reason: ExitReason
    /// The app's exit code, when it exited.
    public var code: Int32?
    /// The signal that ended it, when one did.
    public var signal: Int32?
    public var message: String?

    public init(
        reason: ExitReason, code: Int32? = nil, signal: Int32? = nil, message: String? = nil
    ) {
        self.reason = reason
        self.code = code
        self.signal = signal
        self.message = message
    }

    /// What a shell reports for it: the code, 128+signal, or 127 when it never ran.
    public var shellCode: Int32 {
        if let code { return code }
        if let signal { return 128 + signal }
        return reason == .failedToLaunch ? 127 : 1
    }

    public var description: String {
        let how: String
        if let code {
            how = "code \(code)"
        } else if let signal {
            how = "signal \(signal) (\(String(cString: strsignal(signal))))"
        } else {
            how = ""
        }
        var text = reason.rawValue
        if !how.isEmpty { text += reason == .exited ? " with \(how)" : ", \(how)" }
        if let message { text += ": \(message)" }
        return text
    }
}

/// One instance: `GET /v1/instances`, `GET /v1/instances/{id}`, and the answer to a launch.
public struct APIInstance: Codable, Sendable, Equatable {
    /// 12 hex digits, unique for the life of the state root.
    public var id: String
    public var app: String
    public var state: InstanceState
    /// The launcher's pid on the host (the app runs in its own pid namespace below it).
    public var pid: Int32?
    public var uid: UInt32
    public var arguments: [String]
    /// The uid of the client that launched it.
    public var launchedBy: UInt32
    public var startedAt: Date
    public var endedAt: Date?
    public var exit: APIExit?
    /// The instance's cgroup directory (in the first hierarchy appd uses: the v2 tree on a
    /// unified host). Its processes are in its leaves: `app/` (launcher, PID 1, the app; what a
    /// suspend freezes) and `relay/` (the output relay); an instance adopted from an appd
    /// before the leaves has them in the directory itself (docs/app-output.md).
    public var cgroup: String?
    /// Where its stdout and stderr go (`GET /v1/instances/{id}/logs` reads it).
    public var log: String
    /// The lifecycle channel: `silent` (a plain program so far), `launching` (said hello, not
    /// ready yet), `ready`, `closed` (the app closed it, broke the protocol, or appd restarted).
    public var channel: ChannelState?
    /// Background tasks it holds now.
    public var backgroundTasks: Int?
    /// Its `UIBackgroundModes` that `[Lifecycle] AllowedBackgroundModes` allows: with any, it
    /// is not frozen in the background.
    public var backgroundModes: [String]?
    /// When it last entered its current state; and when it was last active (jetsam kills the
    /// least recently used first).
    public var stateSince: Date?
    public var lastActiveAt: Date?
    /// What the sandbox and appd refused it so far (`appctl denials ID`); and how many of those
    /// went uncounted in the list, over the rate limit.
    public var denials: Int?
    public var denialsDropped: Int?
    /// A service (`LSBackgroundOnly` in its Info.plist): never frozen, never the active app,
    /// ended by jetsam only after the ordinary background apps (docs/lifecycle.md, "Services").
    public var service: Bool?
    /// The `CFBundleVersion` it was launched from; `outdated` once another bundle of the app
    /// was installed while it ran (`appd install --restart` restarts those).
    public var version: String?
    public var outdated: Bool?
    /// What the kernel gave back of its memory when it was last frozen (`[Lifecycle]
    /// SuspendedMemory`); absent before, while it is reclaimed, and once it is thawed.
    public var memoryReclaim: APIMemoryReclaim?
    /// When appd next wakes the app for a background fetch, if it asked for fetches
    /// (docs/lifecycle.md, "Background fetch"); the schedule is the app's, shared by its
    /// instances.
    public var nextFetch: Date?

    public init(
        id: String, app: String, state: InstanceState, pid: Int32?, uid: UInt32,
        arguments: [String],
        launchedBy: UInt32, startedAt: Date, endedAt: Date? = nil, exit: APIExit? = nil,
        cgroup: String? = nil, log: String
    ) {
        self.id = id
        self.app = app
        self.state = state
        self.pid = pid
        self.uid = uid
        self.arguments = arguments
        self.launchedBy = launchedBy
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.exit = exit
        self.cgroup = cgroup
        self.log = log
    }
}

/// Memory reclaimed from a frozen instance (docs/lifecycle.md, "Memory back on freeze").
public struct APIMemoryReclaim: Codable, Sendable, Equatable {
    /// The interface file used: `memory.reclaim` (cgroup v2) or `memory.limit_in_bytes` (v1).
    public var method: String
    /// Bytes: what it was asked down to, and the instance's usage before and after.
    public var target: Int64
    public var before: Int64
    public var after: Int64
    public var milliseconds: Double
    /// Why it stopped above the target (nothing more to reclaim, the time bound, a thaw);
    /// absent when it reached it.
    public var stopped: String?

    public init(
        method: String, target: Int64, before: Int64, after: Int64, milliseconds: Double,
        stopped: String?
    ) {
        self.method = method
        self.target = target
        self.before = before
        self.after = after
        self.milliseconds = milliseconds
        self.stopped = stopped
    }
}

/// The lifecycle channel of an instance, as the daemon sees it (docs/lifecycle.md).
public enum ChannelState: String, Codable, Sendable {
    /// The app never wrote to it: a plain program, told nothing.
    case silent
    /// `hello` received, `ready` not yet: the launch watchdog runs.
    case launching
    case ready
    /// Closed by the app, after a protocol error, or lost in a daemon restart.
    case closed
}

/// `POST /v1/apps/{id}/launch`.
public struct LaunchRequest: Codable, Sendable {
    /// argv after argv[0] (the executable).
    public var arguments: [String]
    /// Launch into the background (inactive → background) instead of making it the active app.
    public var background: Bool

    public init(arguments: [String] = [], background: Bool = false) {
        self.arguments = arguments
        self.background = background
    }

    /// `{}` (what an empty body reads as) launches without arguments, into the foreground.
    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        arguments = try container.decodeIfPresent([String].self, forKey: .arguments) ?? []
        background = try container.decodeIfPresent(Bool.self, forKey: .background) ?? false
    }

    enum CodingKeys: String, CodingKey { case arguments, background }
}

/// `POST /v1/memory-warning`: the instances that were sent didReceiveMemoryWarning.
public struct APIMemoryWarning: Codable, Sendable, Equatable {
    /// Instances whose channel is open and who are not frozen: those who got it.
    public var delivered: [String]

    public init(delivered: [String]) { self.delivered = delivered }
}

/// `POST /v1/instances/{id}/terminate`.
public struct TerminateRequest: Codable, Sendable {
    /// Seconds between SIGTERM and killing the cgroup; nil = `TerminateGracePeriod` of the config.
    public var grace: Double?

    public init(grace: Double? = nil) { self.grace = grace }
}

/// A lifecycle event, one JSON object per line on `GET /v1/events`.
public struct APIEvent: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable {
        case installed, uninstalled, launched, state, exited
        /// A lifecycle message to or from the app (`detail`: `-> didEnterBackground`,
        /// `<- ready`), or something the daemon decided about it (`detail`: `memory warning`).
        case message
        /// The sandbox or appd refused it something (`denial` says what).
        case denial
        /// Not an event: events a client asked for (`since=`) or should have had are gone;
        /// `detail` says which, `seq` is the last one missed, `app` is empty.
        case gap
    }

    /// Increases by one per event for the life of the daemon.
    public var seq: Int
    public var time: Date
    public var kind: Kind
    public var app: String
    public var instance: String?
    public var state: InstanceState?
    public var exit: APIExit?
    public var version: String?
    /// What a `message` event says, or why a `state` event happened (`jetsam`,
    /// `background grace period over`).
    public var detail: String?
    /// A `denial` event's denial.
    public var denial: APIDenial?

    public init(
        seq: Int, time: Date, kind: Kind, app: String, instance: String? = nil,
        state: InstanceState? = nil, exit: APIExit? = nil, version: String? = nil,
        detail: String? = nil,
        denial: APIDenial? = nil
    ) {
        self.detail = detail
        self.denial = denial
        self.seq = seq
        self.time = time
        self.kind = kind
        self.app = app
        self.instance = instance
        self.state = state
        self.exit = exit
        self.version = version
    }
}

/// `GET /v1/version`: who answers, and what the caller may do.
public struct APIDaemonInfo: Codable, Sendable {
    public var version: String
    public var pid: Int32
    public var stateRoot: String
    public var startedAt: Date
    /// What SO_PEERCRED says the caller is, and the rights the config gives it.
    public var caller: APICaller
    /// The appd.conf the daemon reads (at start, on reload); `configFileExists` false: it is
    /// not there and the built-in settings are in force. Nil from daemons before 0.4.
    public var configFile: String?
    public var configFileExists: Bool?

    public init(
        version: String, pid: Int32, stateRoot: String, startedAt: Date, caller: APICaller,
        configFile: String? = nil,
        configFileExists: Bool? = nil
    ) {
        self.version = version
        self.pid = pid
        self.stateRoot = stateRoot
        self.startedAt = startedAt
        self.caller = caller
        self.configFile = configFile
        self.configFileExists = configFileExists
    }
}

public struct APICaller: Codable, Sendable, Equatable {
    public var uid: UInt32
    public var gid: UInt32
    public var pid: Int32
    /// Of `read`, `control`, `admin`.
    public var rights: [String]

    public init(uid: UInt32, gid: UInt32, pid: Int32, rights: [String]) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
        self.rights = rights
    }
}
