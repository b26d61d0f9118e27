import Foundation

/// The running app as the runtime sees it (UIKit's `UIApplication`): its state, its launch
/// options, its background tasks. `AppMain.run(delegate:)` sets up `shared`; the lifecycle
/// events from appd arrive here and go to the delegate.
@MainActor
public final class Application {
    /// The process's app. Used before `AppMain.run` it is a standalone app with no delegate.
    public static let shared = Application()

    public private(set) var state: ApplicationState = .inactive
    /// Set once `didFinishLaunching` has been delivered.
    public private(set) var launchOptions: LaunchOptions?
    /// Seconds appd gives the app in the background before freezing it, from the last
    /// `didEnterBackground`; nil when not told.
    public private(set) var backgroundGracePeriod: Double?
    /// Seconds appd gave the fetch in hand (performFetch's `timeRemaining`); nil when none.
    public internal(set) var fetchTimeRemaining: Double?
    /// Whether a lifecycle channel connects the app to appd right now.
    public var isAttachedToDaemon: Bool { channel != nil }

    var delegate: (any AppDelegate)?
    var channel: LifecycleChannel?
    var tasks = BackgroundTaskTable()
    var isTerminating = false
    /// How the process ends; tests replace it to watch instead of exiting.
    var exitProcess: (Int32) -> Void = { Foundation.exit($0) }
    /// Where diagnostics go; tests replace it to read them.
    var log: (String) -> Void = { runtimeLog($0) }

    init() {}

    /// Starts the lifecycle: with a channel, sends `hello` and waits for appd's
    /// `didFinishLaunching`; without one (run outside appd), launches and activates at once.
    func start(delegate: any AppDelegate, channel: LifecycleChannel?) {
        self.delegate = delegate
        self.channel = channel
        guard let channel else {
            finishLaunching(
                LaunchOptions(
                    instance: nil, arguments: Array(CommandLine.arguments.dropFirst()),
                    launchedBy: .init(
                        uid: Int(getuid()), user: ProcessInfo.processInfo.environment["USER"]),
                    state: .inactive, isAttachedToDaemon: false))
            receive(.message(.didBecomeActive))
            return
        }
        send(.hello)
        channel.startReader { event in
            // The main queue is FIFO, so events reach the delegate in the order appd sent them.
            DispatchQueue.main.async {
                MainActor.assumeIsolated { Application.deliver(event, to: self) }
            }
        }
    }

    private static func deliver(_ event: LifecycleChannel.Event, to app: Application) {
        app.receive(event)
    }

    /// One event from the channel, on the main actor.
    func receive(_ event: LifecycleChannel.Event) {
        switch event {
        case .malformed(let reason):
            log("ignored a malformed message from appd: \(reason)")
        case .closed(let reason):
            // appd went away or closed the channel: carry on as a plain program, as the
            // contract treats an app whose channel is closed.
            if let reason { log("lifecycle channel closed: \(reason)") }
            channel?.close()
            channel = nil
        case .message(let message):
            receive(message)
        }
    }

    private func receive(_ message: DaemonMessage) {
        if isTerminating { return }
        if case .didFinishLaunching(let instance, let arguments, let launchedBy, let state) =
            message
        {
            guard launchOptions == nil else {
                log("ignored a second didFinishLaunching")
                return
            }
            finishLaunching(
                LaunchOptions(
                    instance: instance, arguments: arguments, launchedBy: launchedBy, state: state,
                    isAttachedToDaemon: true))
            return
        }
        guard launchOptions != nil, let delegate else {
            log("ignored \(message) before didFinishLaunching")
            return
        }
        switch message {
        case .didFinishLaunching: break
        case .didBecomeActive:
            state = .active
            delegate.didBecomeActive()
        case .willResignActive:
            delegate.willResignActive()
            state = .inactive
        case .didEnterBackground(let gracePeriod):
            state = .background
            backgroundGracePeriod = gracePeriod
            delegate.didEnterBackground()
        case .willEnterForeground:
            delegate.willEnterForeground()
            state = .inactive
        case .willTerminate:
            terminate()
        case .didReceiveMemoryWarning:
            delegate.didReceiveMemoryWarning()
        case .backgroundTaskBegan(let ref, let task, _, let reason):
            backgroundTaskBegan(ref: ref, task: task, reason: reason)
        case .backgroundTaskWillExpire(let task, _):
            backgroundTaskWillExpire(task: task)
        case .defaultsDidChange:
            // appd rewrote the app's domain (`appd defaults`): the file wins over what is in
            // memory, as after UserDefaults' didChangeExternallyNotification.
            Preferences.standard.synchronize()
            delegate.defaultsDidChange()
        case .performFetch(let fetch, let timeRemaining):
            performFetch(fetch, timeRemaining: timeRemaining, delegate: delegate)
        case .unknown:
            break  // forward compatibility: a newer appd may send types this runtime predates
        }
    }

    private func finishLaunching(_ options: LaunchOptions) {
        launchOptions = options
        state = options.state
        delegate?.didFinishLaunching(options: options)
        send(.ready)
    }

    /// willTerminate (from appd, or SIGTERM/SIGINT, whichever comes first), then exit. appd
    /// sends both at once; the delegate hears it once.
    func terminate() {
        guard !isTerminating else { return }
        isTerminating = true
        if launchOptions != nil { delegate?.willTerminate() }
        exitProcess(0)
    }

    /// Sends a message if the channel is open; a failed send closes the channel, since appd
    /// would treat what follows as out of order anyway.
    func send(_ message: AppMessage) {
        guard let channel else { return }
        do {
            try channel.send(message)
        } catch {
            log("\(error); continuing without appd")
            channel.shutdown()
        }
    }
}
