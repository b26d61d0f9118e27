import Foundation

/// Where a running instance is in its life.
public enum InstanceState: String, Codable, Sendable, CaseIterable {
    /// Spawned; the launcher is building the sandbox.
    case launching
    case running
    /// Frozen (cgroup freezer): no CPU until resumed.
    case suspended
    /// Asked to stop: SIGTERM sent, the grace period runs.
    case terminating
    case exited
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
}

public struct APIExit: Codable, Sendable, Equatable, CustomStringConvertible {
    public var reason: ExitReason
    /// The app's exit code, when it exited.
    public var code: Int32?
    /// The signal that ended it, when one did.
    public var signal: Int32?
    public var message: String?

    public init(reason: ExitReason, code: Int32? = nil, signal: Int32? = nil, message: String? = nil) {
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
    /// The instance's cgroup (v2 path, or the freezer's on a v1 host).
    public var cgroup: String?
    /// Where its stdout and stderr go (`GET /v1/instances/{id}/logs` reads it).
    public var log: String

    public init(
        id: String, app: String, state: InstanceState, pid: Int32?, uid: UInt32, arguments: [String],
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

/// `POST /v1/apps/{id}/launch`.
public struct LaunchRequest: Codable, Sendable {
    /// argv after argv[0] (the executable).
    public var arguments: [String]

    public init(arguments: [String] = []) { self.arguments = arguments }

    /// `{}` (what an empty body reads as) launches without arguments.
    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        arguments = try container.decodeIfPresent([String].self, forKey: .arguments) ?? []
    }

    enum CodingKeys: String, CodingKey { case arguments }
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

    public init(
        seq: Int, time: Date, kind: Kind, app: String, instance: String? = nil,
        state: InstanceState? = nil, exit: APIExit? = nil, version: String? = nil
    ) {
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

    public init(version: String, pid: Int32, stateRoot: String, startedAt: Date, caller: APICaller) {
        self.version = version
        self.pid = pid
        self.stateRoot = stateRoot
        self.startedAt = startedAt
        self.caller = caller
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
