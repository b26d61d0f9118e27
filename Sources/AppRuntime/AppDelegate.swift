/// What an app implements to hear about its lifecycle; every method is optional.
///
/// Main-actor isolated, as UIKit's `UIApplicationDelegate` is: the runtime calls it only from the
/// main run loop, one event at a time and in the order appd sent them, so a delegate may keep
/// plain mutable state without locks.
@MainActor
public protocol AppDelegate: AnyObject {
    /// The app is launched; do the initial setup here. appd learns that launching finished
    /// (`ready`) when this returns, and its launch watchdog is waiting for that.
    func didFinishLaunching(options: LaunchOptions)
    /// active → inactive: pause what needs the user's attention.
    func willResignActive()
    /// inactive → active: the app is the foreground app.
    func didBecomeActive()
    /// inactive → background: save state now. After the grace period appd freezes the app
    /// unless it holds a background task or declares an allowed `UIBackgroundModes` value.
    func didEnterBackground()
    /// background → inactive: undo what `didEnterBackground` did.
    func willEnterForeground()
    /// The app is being terminated; the process exits when this returns. Not called for an app
    /// killed while suspended (as on iOS).
    func willTerminate()
    /// The host is short of memory: drop caches now, or appd may terminate the app.
    func didReceiveMemoryWarning()
    /// The admin changed the app's preferences (`appd defaults`); `Preferences.standard` has
    /// read them again already.
    func defaultsDidChange()
    /// appd woke the suspended app to fetch new content (`setMinimumBackgroundFetchInterval`
    /// asked for it): fetch, then call `completion` with what came, within the seconds appd
    /// gave (`Application.fetchTimeRemaining`, 30 by default). appd freezes the app again
    /// when it is called, or when the time is up (then appd wakes it less often).
    func performFetch(completion: @escaping @MainActor (BackgroundFetchResult) -> Void)
}

extension AppDelegate {
    public func didFinishLaunching(options: LaunchOptions) {}
    public func willResignActive() {}
    public func didBecomeActive() {}
    public func didEnterBackground() {}
    public func willEnterForeground() {}
    public func willTerminate() {}
    public func didReceiveMemoryWarning() {}
    public func defaultsDidChange() {}
    public func performFetch(completion: @escaping @MainActor (BackgroundFetchResult) -> Void) {
        completion(.noData)
    }
}

/// What a background fetch brought (UIKit's `UIBackgroundFetchResult`).
public enum BackgroundFetchResult: String, Sendable, CaseIterable {
    case newData
    case noData
    case failed
}

/// The app's state as the runtime last heard it from appd (UIKit's `applicationState`).
public enum ApplicationState: String, Sendable {
    /// In the foreground, not receiving events: launching, or between active and background.
    case inactive
    case active
    case background
}

/// What `didFinishLaunching` is told: the `didFinishLaunching` message of docs/lifecycle.md, or,
/// run outside appd, what the process itself knows.
public struct LaunchOptions: Sendable, Equatable {
    /// Who asked appd to launch the app.
    public struct Launcher: Sendable, Equatable {
        public var uid: Int
        public var user: String?

        public init(uid: Int, user: String?) {
            self.uid = uid
            self.user = user
        }
    }

    /// appd's instance id; nil when run outside appd.
    public var instance: String?
    /// The launch arguments (without the executable's name).
    public var arguments: [String]
    public var launchedBy: Launcher?
    /// The state the app starts in: `inactive`, or `background` when launched into it.
    public var state: ApplicationState
    /// Whether a lifecycle channel connects the app to appd.
    public var isAttachedToDaemon: Bool

    public init(
        instance: String?, arguments: [String], launchedBy: Launcher?, state: ApplicationState,
        isAttachedToDaemon: Bool
    ) {
        self.instance = instance
        self.arguments = arguments
        self.launchedBy = launchedBy
        self.state = state
        self.isAttachedToDaemon = isAttachedToDaemon
    }
}
