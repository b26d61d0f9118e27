import Glibc

/// `[Lifecycle]`: how appd runs apps through iOS's states (docs/lifecycle.md): who is active,
/// how long an app runs in the background, the launch watchdog, and the memory budget jetsam
/// keeps.
public struct LifecycleSettings: Sendable, Equatable {
    public enum ActivePolicy: String, Sendable, CaseIterable {
        /// One active app at a time, as on iOS: activating one sends the active one to the
        /// background.
        case single
        /// Every app is active when launched (server hosts): nothing is backgrounded unless
        /// asked.
        case all
    }

    /// What happens to an app still holding a background task after its expiration warning.
    public enum ExpiredTaskAction: String, Sendable, CaseIterable {
        /// Its cgroup is killed, reason `background-task-expired` (as iOS does).
        case kill
        /// It is frozen like any app in the background; the task counts as ended.
        case suspend
    }

    /// The values of `UIBackgroundModes` appd knows.
    public static let knownBackgroundModes = ["audio", "location", "voip", "fetch", "processing"]

    public var activePolicy = ActivePolicy.single
    /// Seconds between didEnterBackground and the freeze.
    public var backgroundGracePeriod: Double = 5
    /// Seconds a background task gets when the app asks for no particular time.
    public var backgroundTaskTime: Double = 30
    /// The most a background task may get, whatever the app asks.
    public var backgroundTaskMaxTime: Double = 600
    /// Seconds between backgroundTaskWillExpire and `expiredTaskAction`.
    public var backgroundTaskExpirationGrace: Double = 5
    public var expiredTaskAction = ExpiredTaskAction.kill
    /// Background tasks one instance may hold at once; more are refused.
    public var maxBackgroundTasks = 16
    /// Seconds between `hello` and `ready` before the instance is killed (`launch-watchdog`).
    public var launchWatchdog: Double = 20
    /// `UIBackgroundModes` values that keep an app running in the background.
    public var allowedBackgroundModes: [String] = ["audio", "location", "voip"]
    /// Memory all apps together may use (sum of their cgroups' usage); nil: no budget.
    public var memoryBudget: Int64?
    /// The most the active app may use before jetsam may end it too; nil: the budget.
    public var activeMemoryLimit: Int64?
    /// `/proc/pressure/memory` `some avg10` (percent) at which apps get didReceiveMemoryWarning;
    /// 0: never from PSI.
    public var memoryPressureWarning: Double = 10
    /// `full avg10` (percent) at which jetsam ends suspended, then background apps; 0: never.
    public var memoryPressureCritical: Double = 30
    /// What a frozen app's memory is reclaimed down to (docs/lifecycle.md, "Memory back on
    /// freeze"); nil: nothing is reclaimed. iOS's figure for an app it keeps suspended.
    public var suspendedMemory: Int64? = 16 << 20
    /// The most time one reclaim may take, after which it stops where it is.
    public static let suspendedMemoryTimeout: Double = 2
    /// Seconds between two memory checks.
    public var memoryCheckInterval: Double = 1
    /// `[App ID] KeepAlive=`: seconds before the first restart; each restart in a row doubles
    /// it (at most `keepAliveMaxDelay`).
    public var keepAliveDelay: Double = 1
    public static let keepAliveMaxDelay: Double = 300
    /// Restarts in a row (each run shorter than `keepAliveStableTime`) before appd gives up:
    /// a crash loop.
    public var keepAliveLimit = 5
    /// A run at least this long ends the crash loop count.
    public var keepAliveStableTime: Double = 60
    /// Seconds an app woken for a background fetch has to answer performFetch before it is
    /// frozen again regardless (and its interval lengthens).
    public var fetchDeadline: Double = 30
    /// The shortest background fetch interval an app gets, whatever it asks for
    /// (`[App ID] MinimumFetchInterval=` bounds one app instead).
    public var minimumFetchInterval: Double = 60

    /// Seconds before restart number `attempt` (1 for the first).
    public func keepAliveDelay(attempt: Int) -> Double {
        let doublings = Double(max(0, min(attempt - 1, 30)))
        return min(keepAliveDelay * pow(2, doublings), max(keepAliveDelay, Self.keepAliveMaxDelay))
    }

    public init() {}

    /// The time a background task gets when the app asks for `requested` seconds (nil: the default).
    public func taskTime(requested: Double?) -> Double {
        min(max(requested ?? backgroundTaskTime, 0.1), backgroundTaskMaxTime)
    }
}
