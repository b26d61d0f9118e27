import AppdAPI
import AppdCLI
import AppdClient
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// `appctl launch --console`: launch, stream the output until the instance exits, return it
/// as ended. Ctrl-C (or SIGTERM) asks the daemon to terminate the instance, a second one to
/// kill it, while the output keeps streaming: the app ends the way a foreground program ends,
/// and its last words are not lost. A third one leaves without waiting.
final class ConsoleSession: @unchecked Sendable {
    private let client: AppdClient
    private let lock = Mutex(())
    /// Guarded by `lock`: the signal thread may come before the launch has answered.
    private var instance: String?
    private var interrupts = 0

    init(client: AppdClient) {
        self.client = client
    }

    func run(app: String, arguments: [String]) throws -> APIInstance {
        // Blocked in every thread from here on (threads inherit the mask), taken by one thread
        // with sigwait: the requests it makes are ordinary code, not a signal handler's.
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        let blocked = signals
        // A plain pthread (Foundation's Thread is not in FoundationEssentials), never joined.
        let waiter = SignalWaiter(signals: blocked) { [self] in interrupted() }
        waiter.start()

        // One exchange (docs/api.md, "Attached launch"): the instance, its output, its exit.
        let attached = try client.launchAttached(app, LaunchRequest(arguments: arguments)) {
            [self] launched in
            let early = lock.withLock { _ in
                instance = launched.id
                return interrupts
            }
            if early > 0 { stop(launched.id, kill: early > 1) }
        } onOutput: { bytes in
            try Output.raw(bytes)
        }
        switch attached {
        case .ended(let ended):
            return ended
        case .notAttached(let launched):
            // An appd from before attach=1: its output and its exit, each on its own request.
            try client.logs(launched.id, .init(follow: true)) { bytes in
                try Output.raw(bytes)
            }
            return try client.wait(launched.id)
        }
    }

    private func interrupted() {
        let (id, count) = lock.withLock { _ in
            interrupts += 1
            return (instance, interrupts)
        }
        // A daemon that does not act on the first two must not hold the terminal hostage.
        if count > 2 {
            Output.note(
                "appctl: giving up\(id.map { "; \($0) may still run (appctl ps)" } ?? "")")
            exit(128 + SIGINT)
        }
        guard let id else { return }  // run() stops it as soon as the launch answers.
        stop(id, kill: count > 1)
    }

    private func stop(_ id: String, kill: Bool) {
        Output.note(
            kill ? "appctl: killing \(id)" : "appctl: terminating \(id) (Ctrl-C again to kill it)")
        do {
            if kill {
                _ = try client.kill(id)
            } else {
                _ = try client.terminate(id)
            }
        } catch  where error.code == .notFound || error.code == .conflict {
            // Already gone: the stream ends by itself.
        } catch {
            Output.note("appctl: \(Output.text(of: error))")
        }
    }
}

/// The thread that takes SIGINT/SIGTERM with sigwait and hands each to `handler`. Lives as long
/// as the process (the session ends with it), so it is detached and never joined.
private final class SignalWaiter: @unchecked Sendable {
    private let signals: sigset_t
    private let handler: @Sendable () -> Void

    init(signals: sigset_t, handler: @escaping @Sendable () -> Void) {
        self.signals = signals
        self.handler = handler
    }

    func start() {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let started = pthread_create(
            &thread, nil,
            { context in
                guard let context else { return nil }
                let waiter = Unmanaged<SignalWaiter>.fromOpaque(context).takeRetainedValue()
                var set = waiter.signals
                var signal: Int32 = 0
                while sigwait(&set, &signal) == 0 { waiter.handler() }
                return nil
            }, context)
        if started == 0 {
            pthread_detach(thread)
        } else {
            // No thread: Ctrl-C stays blocked; say so rather than hang on it silently.
            Unmanaged<SignalWaiter>.fromOpaque(context).release()
            Output.note(
                "appctl: cannot start the signal thread: \(String(cString: strerror(started)))")
        }
    }
}
