import Foundation

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

    /// Seconds before restart number `attempt` (1 for the first).
    public func keepAliveDelay(attempt: Int) -> Double {
        let doublings = Double(max(0, min(attempt - 1, 30)))
        return min(keepAliveDelay * pow(2, doublings), max(keepAliveDelay, Self.keepAliveMaxDelay))
    }

    public init() {}

    static let keys = [
        "ActivePolicy", "BackgroundGracePeriod", "BackgroundTaskTime", "BackgroundTaskMaxTime",
        "BackgroundTaskExpirationGrace", "ExpiredBackgroundTask", "MaxBackgroundTasks",
        "LaunchWatchdog",
        "AllowedBackgroundModes", "MemoryBudget", "ActiveMemoryLimit", "MemoryPressureWarning",
        "MemoryPressureCritical", "MemoryCheckInterval", "KeepAliveDelay", "KeepAliveLimit",
        "KeepAliveStableTime",
    ]

    enum Outcome: Equatable {
        case ok
        case invalid(String)
        case unknownKey
    }

    mutating func set(key: String, value: String, parseSize: (String) -> Int64?) -> Outcome {
        func seconds(_ range: ClosedRange<Double>) -> Double? {
            guard let n = Double(value.hasSuffix("s") ? String(value.dropLast()) : value),
                range.contains(n)
            else { return nil }
            return n
        }
        func percent() -> Double? {
            guard let n = Double(value.hasSuffix("%") ? String(value.dropLast()) : value),
                (0...100).contains(n)
            else { return nil }
            return n
        }
        switch key {
        case "ActivePolicy":
            guard let policy = ActivePolicy(rawValue: value) else {
                return .invalid("single or all")
            }
            activePolicy = policy
        case "BackgroundGracePeriod":
            guard let n = seconds(0...3600) else { return .invalid("a number of seconds (0-3600)") }
            backgroundGracePeriod = n
        case "BackgroundTaskTime":
            guard let n = seconds(0.1...86400) else {
                return .invalid("a number of seconds (0.1-86400)")
            }
            backgroundTaskTime = n
        case "BackgroundTaskMaxTime":
            guard let n = seconds(0.1...86400) else {
                return .invalid("a number of seconds (0.1-86400)")
            }
            backgroundTaskMaxTime = n
        case "BackgroundTaskExpirationGrace":
            guard let n = seconds(0...600) else { return .invalid("a number of seconds (0-600)") }
            backgroundTaskExpirationGrace = n
        case "ExpiredBackgroundTask":
            guard let action = ExpiredTaskAction(rawValue: value) else {
                return .invalid("kill or suspend")
            }
            expiredTaskAction = action
        case "MaxBackgroundTasks":
            guard let n = Int(value), (1...1024).contains(n) else {
                return .invalid("a whole number (1-1024)")
            }
            maxBackgroundTasks = n
        case "LaunchWatchdog":
            guard let n = seconds(0.1...3600) else {
                return .invalid("a number of seconds (0.1-3600)")
            }
            launchWatchdog = n
        case "AllowedBackgroundModes":
            let modes = value.split(whereSeparator: \.isWhitespace).map(String.init)
            guard modes.allSatisfy(Self.knownBackgroundModes.contains) else {
                return .invalid(
                    "a space-separated list of " + Self.knownBackgroundModes.joined(separator: ", ")
                )
            }
            allowedBackgroundModes = modes
        case "MemoryBudget", "ActiveMemoryLimit":
            var size: Int64?
            if !value.isEmpty {
                guard let n = parseSize(value), n > 0 else {
                    return .invalid(
                        "a size (a number with an optional K, M, G or T suffix) or empty")
                }
                size = n
            }
            if key == "MemoryBudget" { memoryBudget = size } else { activeMemoryLimit = size }
        case "MemoryPressureWarning", "MemoryPressureCritical":
            guard let n = percent() else { return .invalid("a percentage (0-100; 0 turns it off)") }
            if key == "MemoryPressureWarning" {
                memoryPressureWarning = n
            } else {
                memoryPressureCritical = n
            }
        case "MemoryCheckInterval":
            guard let n = seconds(0.05...60) else {
                return .invalid("a number of seconds (0.05-60)")
            }
            memoryCheckInterval = n
        case "KeepAliveDelay":
            guard let n = seconds(0.05...3600) else {
                return .invalid("a number of seconds (0.05-3600)")
            }
            keepAliveDelay = n
        case "KeepAliveLimit":
            guard let n = Int(value), (1...1000).contains(n) else {
                return .invalid("a whole number (1-1000)")
            }
            keepAliveLimit = n
        case "KeepAliveStableTime":
            guard let n = seconds(0...86400) else {
                return .invalid("a number of seconds (0-86400)")
            }
            keepAliveStableTime = n
        default:
            return .unknownKey
        }
        return .ok
    }

    /// The time a background task gets when the app asks for `requested` seconds (nil: the default).
    public func taskTime(requested: Double?) -> Double {
        min(max(requested ?? backgroundTaskTime, 0.1), backgroundTaskMaxTime)
    }
}
