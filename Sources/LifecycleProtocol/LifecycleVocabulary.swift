// The lifecycle channel's vocabulary (docs/lifecycle.md), spelled once for its two sides: the
// daemon (Supervisor) and what apps link (AppRuntime). Standard library only, so that AppRuntime
// stays "Foundation only, never the daemon's modules": this is neither.

/// The wire: one UTF-8 JSON object per datagram on a `SOCK_SEQPACKET` socket, at most
/// `maxMessageBytes`, with a `"type"`; unknown types and unknown fields are ignored.
public enum LifecycleWire {
    public static let maxMessageBytes = 64 << 10
    /// The version the app's `hello` names.
    public static let version = 1
    /// The variable that names the app's end of the channel (fd 3).
    public static let environmentVariable = "APPD_LIFECYCLE_FD"
    /// setMinimumBackgroundFetchInterval's `interval` that turns background fetch off (iOS's
    /// `UIApplication.backgroundFetchIntervalNever`); otherwise a number of seconds.
    public static let fetchIntervalNever = "never"
}

/// fetchCompleted's `result`: what a background fetch brought (iOS's
/// `UIBackgroundFetchResult`).
public enum FetchResult: String, Sendable, CaseIterable, Codable {
    case newData
    case noData
    case failed
}

/// The `type` of a message the app sends to the daemon.
public enum AppMessageType: String, Sendable, CaseIterable {
    case hello
    case ready
    case beginBackgroundTask
    case endBackgroundTask
    /// Asks for background fetches at most this often (`interval`: seconds, or "never").
    case setMinimumBackgroundFetchInterval
    /// The answer to performFetch (`fetch`, `result`).
    case fetchCompleted
}

/// The `type` of a message the daemon sends to the app.
public enum DaemonMessageType: String, Sendable, CaseIterable {
    case didFinishLaunching
    case didBecomeActive
    case willResignActive
    case didEnterBackground
    case willEnterForeground
    case willTerminate
    case didReceiveMemoryWarning
    case backgroundTaskBegan
    case backgroundTaskWillExpire
    /// The admin changed the app's preferences (`appd defaults`): read them again.
    case defaultsDidChange
    /// The app was woken to fetch (`fetch`, `timeRemaining`); it answers fetchCompleted.
    case performFetch
}

/// Every field name of either direction (a `CodingKey`, so a Codable side can key by it).
public enum LifecycleField: String, Sendable, CaseIterable, CodingKey {
    case type
    /// hello: the protocol version the app speaks.
    case version
    /// beginBackgroundTask: the task's name, the app's own number for it, the seconds asked.
    case name, ref, seconds
    /// endBackgroundTask, backgroundTaskBegan, backgroundTaskWillExpire: the daemon's number.
    case task
    /// didFinishLaunching.
    case instance, arguments, launchedBy, state
    /// launchedBy's fields.
    case uid, user
    /// didEnterBackground, willTerminate: seconds before the daemon acts.
    case gracePeriod
    /// backgroundTaskBegan, backgroundTaskWillExpire.
    case timeRemaining
    /// backgroundTaskBegan: why the task got no time (task 0).
    case reason
    /// setMinimumBackgroundFetchInterval: seconds, or "never".
    case interval
    /// performFetch, fetchCompleted: the daemon's number of the fetch.
    case fetch
    /// fetchCompleted: newData, noData or failed (`FetchResult`).
    case result
}

/// The states the app sees (didFinishLaunching's `state`).
public enum LifecycleAppState: String, Sendable, CaseIterable {
    /// In the foreground, not receiving events: launching, or between active and background.
    case inactive
    case active
    case background
}
