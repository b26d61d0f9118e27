import Foundation

/// The app's entry point (UIKit's `UIApplicationMain`): `AppMain.run(delegate: MyDelegate())`
/// from `main.swift`.
public enum AppMain {
    /// Connects to appd's lifecycle channel if `APPD_LIFECYCLE_FD` names one, delivers the
    /// lifecycle to `delegate` on the main run loop, and runs that loop until the app is
    /// terminated (willTerminate from appd, SIGTERM or SIGINT: the delegate's `willTerminate`
    /// runs, then the process exits 0).
    ///
    /// Without the variable (run outside appd) the app still works: it gets `didFinishLaunching`
    /// and `didBecomeActive` and runs until SIGTERM or SIGINT. A variable that does not name a
    /// usable socket is reported on stderr and treated the same way.
    ///
    /// stdout becomes line-buffered, so `print` reaches appd's log line by line.
    @MainActor
    public static func run(delegate: some AppDelegate) -> Never {
        StandardOutput.makeLineBuffered()
        let app = Application.shared
        var channel: LifecycleChannel?
        do {
            channel = try LifecycleChannel.fromEnvironment(ProcessInfo.processInfo.environment)
        } catch {
            runtimeLog("\(error); running without appd's lifecycle channel")
        }
        installSignalHandlers(app)
        app.start(delegate: delegate, channel: channel)
        runMainLoop()
    }

    /// SIGTERM and SIGINT are taken over from their default (death) and delivered on the main
    /// queue, so willTerminate runs on the main actor like every other event.
    @MainActor
    private static func installSignalHandlers(_ app: Application) {
        for number in [SIGTERM, SIGINT] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .main)
            source.setEventHandler {
                MainActor.assumeIsolated { app.terminate() }
            }
            source.resume()
            signalSources.append(source)
        }
        // A closed stdout (a console that went away) must not kill the app either.
        signal(SIGPIPE, SIG_IGN)
    }

    @MainActor private static var signalSources: [any DispatchSourceSignal] = []

    /// The main run loop serves the main dispatch queue (the channel's events, signals) and
    /// the app's timers. A timer far in the future keeps it from returning for lack of sources.
    private static func runMainLoop() -> Never {
        let keepAlive = Timer(timeInterval: 1e9, repeats: true) { _ in }
        RunLoop.main.add(keepAlive, forMode: .default)
        while true {
            _ = RunLoop.main.run(mode: .default, before: .distantFuture)
        }
    }
}
