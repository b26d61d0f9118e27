import AppdAPI
import AppdBase
import Foundation

/// What the daemon keeps of one instance in `<runtime>/instances/<id>.json`: enough for a
/// daemon that starts after a crash, or after an upgrade, to find the launcher again (pid and
/// its start time) and its cgroup, and to tell why it ended (Supervisor+Adopt.swift).
///
/// The supervisor's own format, versioned, not the API's: a field of `APIInstance` renamed or a
/// value respelled changes what clients see, never what the next daemon reads. Every word the
/// file holds (states, exit reasons, channel states) is spelled here. Version 1 (daemons up to
/// wave 3) wrote `{"instance": APIInstance, ...}`: `RecordV1` still reads it, and
/// Tests/Fixtures/instance-records/v1-*.json are records that format wrote.
struct InstanceRecord: Codable, Equatable {
    static let currentVersion = 2

    var version: Int
    var id: String
    var app: String
    var uid: UInt32
    var arguments: [String]
    var launchedBy: UInt32
    var startedAt: Date
    var log: String
    var appVersion: String?
    var bundle: String?
    var state: String
    var stateSince: Date?
    var lastActiveAt: Date?
    var endedAt: Date?
    var exit: Exit?
    var channel: String?
    var backgroundTasks: Int?
    var backgroundModes: [String]?
    var service: Bool?
    var outdated: Bool?
    var request: Instance.Request?
    var graceDeadline: Date?
    var requestMessage: String?
    var pid: Int32?
    var pidStartTime: UInt64?
    var cgroup: String?

    struct Exit: Codable, Equatable {
        var reason: String
        var code: Int32?
        var signal: Int32?
        var message: String?
    }

    /// A word of the file that names no value this daemon knows (a newer daemon's record).
    struct UnknownWord: Error, CustomStringConvertible {
        var field: String
        var word: String
        var description: String { "instance record: unknown \(field) '\(word.prefix(40))'" }
    }

    init(_ instance: Instance) {
        version = Self.currentVersion
        id = instance.id
        app = instance.app.spelling
        uid = instance.uid
        arguments = instance.arguments
        launchedBy = instance.launchedBy
        startedAt = instance.startedAt
        log = instance.log
        appVersion = instance.version
        bundle = instance.bundle
        state = Self.word(instance.state)
        stateSince = instance.stateSince
        lastActiveAt = instance.lastActiveAt
        endedAt = instance.endedAt
        exit = instance.exit.map {
            Exit(
                reason: Self.word($0.reason), code: $0.code, signal: $0.signal, message: $0.message)
        }
        channel = instance.channel.map(Self.word)
        backgroundTasks = instance.backgroundTasks
        backgroundModes = instance.backgroundModes
        service = instance.service
        outdated = instance.outdated
        request = instance.request
        graceDeadline = instance.graceDeadline
        requestMessage = instance.requestMessage
        pid = instance.pid
        pidStartTime = instance.pidStartTime
        cgroup = instance.cgroupPath
    }

    /// The instance this record describes (its daemon-only parts empty: no watcher, no
    /// channel, not our child).
    func instance() throws -> Instance {
        guard let state = InstanceState.allCases.first(where: { Self.word($0) == state }) else {
            throw UnknownWord(field: "state", word: state)
        }
        var instance = Instance(
            id: id, app: AppID(app), uid: uid, arguments: arguments, launchedBy: launchedBy,
            startedAt: startedAt, log: log, state: state)
        instance.version = appVersion
        instance.bundle = bundle
        instance.stateSince = stateSince
        instance.lastActiveAt = lastActiveAt
        instance.endedAt = endedAt
        if let exit {
            guard let reason = ExitReason.allCases.first(where: { Self.word($0) == exit.reason })
            else {
                throw UnknownWord(field: "exit reason", word: exit.reason)
            }
            instance.exit = APIExit(
                reason: reason, code: exit.code, signal: exit.signal, message: exit.message)
        }
        if let channel {
            guard let value = Self.channelStates.first(where: { Self.word($0) == channel }) else {
                throw UnknownWord(field: "channel", word: channel)
            }
            instance.channel = value
        }
        instance.backgroundTasks = backgroundTasks
        instance.backgroundModes = backgroundModes
        instance.service = service
        instance.outdated = outdated
        instance.request = request
        instance.graceDeadline = graceDeadline
        instance.requestMessage = requestMessage
        instance.pid = pid
        instance.pidStartTime = pidStartTime
        instance.cgroupPath = cgroup
        return instance
    }

    /// A record of any version this daemon reads: a file without `version` is version 1.
    static func decode(_ data: Data) throws -> Instance {
        struct Probe: Decodable { var version: Int? }
        let decoder = APICoding.decoder()
        switch try decoder.decode(Probe.self, from: data).version {
        case nil: return try decoder.decode(RecordV1.self, from: data).current()
        case currentVersion?: return try decoder.decode(InstanceRecord.self, from: data).instance()
        case let other?: throw UnknownWord(field: "version", word: String(other))
        }
    }

    // MARK: The file's words

    // The words are switches, not raw values: a case the API gains does not build until it
    // has its word here, and the API respelling one changes nothing here.
    static func word(_ state: InstanceState) -> String {
        switch state {
        case .launching: "launching"
        case .inactive: "inactive"
        case .active: "active"
        case .background: "background"
        case .suspended: "suspended"
        case .terminating: "terminating"
        case .exited: "exited"
        case .running: "running"
        }
    }

    static func word(_ reason: ExitReason) -> String {
        switch reason {
        case .exited: "exited"
        case .signaled: "signaled"
        case .terminated: "terminated"
        case .killedAfterGrace: "killed-after-grace"
        case .killed: "killed"
        case .outOfMemory: "out-of-memory"
        case .failedToLaunch: "failed-to-launch"
        case .lost: "lost"
        case .launchWatchdog: "launch-watchdog"
        case .backgroundTaskExpired: "background-task-expired"
        case .jetsam: "jetsam"
        }
    }

    static func word(_ channel: ChannelState) -> String {
        switch channel {
        case .silent: "silent"
        case .launching: "launching"
        case .ready: "ready"
        case .closed: "closed"
        }
    }

    static let channelStates: [ChannelState] = [.silent, .launching, .ready, .closed]
}

/// Version 1 of the record, as daemons before the versioned format wrote it: the API's
/// instance with the supervisor's few fields beside it. Read only (an upgrade re-adopts what
/// the old daemon left); never written.
struct RecordV1: Decodable {
    var instance: APIInstance
    var pidStartTime: UInt64?
    var request: Instance.Request?
    var graceDeadline: Date?
    var requestMessage: String?
    var bundle: String?

    /// The instance it describes, as version 2 holds it.
    func current() -> Instance {
        var result = Instance(
            id: instance.id, app: AppID(instance.app), uid: instance.uid,
            arguments: instance.arguments,
            launchedBy: instance.launchedBy, startedAt: instance.startedAt, log: instance.log,
            state: instance.state)
        result.version = instance.version
        result.bundle = bundle
        result.stateSince = instance.stateSince
        result.lastActiveAt = instance.lastActiveAt
        result.endedAt = instance.endedAt
        result.exit = instance.exit
        result.channel = instance.channel
        result.backgroundTasks = instance.backgroundTasks
        result.backgroundModes = instance.backgroundModes
        result.service = instance.service
        result.outdated = instance.outdated
        result.request = request
        result.graceDeadline = graceDeadline
        result.requestMessage = requestMessage
        result.pid = instance.pid
        result.pidStartTime = pidStartTime
        result.cgroupPath = instance.cgroup
        return result
    }
}
