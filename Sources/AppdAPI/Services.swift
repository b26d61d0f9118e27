#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// An app the admin runs as a service (`[App ID]` `RunAtLoad=` or `KeepAlive=`): `GET
/// /v1/services`, and `service` in `GET /v1/apps/{id}` (docs/lifecycle.md, "Services").
public struct APIService: Codable, Sendable, Equatable {
    public enum State: String, Codable, Sendable {
        /// An instance runs.
        case running
        /// Ended; KeepAlive restarts it at `nextTry`.
        case waiting
        /// Not running and not to be restarted (never started, ended by request, or KeepAlive
        /// does not apply to how it ended).
        case stopped
        /// Restarted `KeepAliveLimit` times in a row, each run shorter than
        /// `KeepAliveStableTime`: appd gave up until someone launches it.
        case crashLoop = "crash-loop"
    }

    public var app: String
    public var state: State
    public var runAtLoad: Bool
    /// `no`, `yes` or `on-failure`.
    public var keepAlive: String
    /// `Arguments=`, when set.
    public var arguments: [String]?
    /// The running instances.
    public var instances: [String]
    /// KeepAlive restarts in a row so far, and the most there may be (`KeepAliveLimit`).
    public var restarts: Int
    public var restartLimit: Int
    public var nextTry: Date?
    /// How its last instance ended.
    public var lastExit: APIExit?
    /// Its next scheduled run (`StartInterval=`, `StartCalendarInterval=`), when it has a
    /// schedule; and the last one.
    public var nextRun: Date?
    public var lastRun: Date?

    public init(
        app: String, state: State, runAtLoad: Bool, keepAlive: String, arguments: [String]?,
        instances: [String],
        restarts: Int, restartLimit: Int, nextTry: Date? = nil, lastExit: APIExit? = nil,
        nextRun: Date? = nil, lastRun: Date? = nil
    ) {
        self.nextRun = nextRun
        self.lastRun = lastRun
        self.app = app
        self.state = state
        self.runAtLoad = runAtLoad
        self.keepAlive = keepAlive
        self.arguments = arguments
        self.instances = instances
        self.restarts = restarts
        self.restartLimit = restartLimit
        self.nextTry = nextTry
        self.lastExit = lastExit
    }
}
