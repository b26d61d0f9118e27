import AppdAPI
import AppdCLI
import AppdClient
import Foundation

/// `appctl launch --console`: launch, stream the output until the instance exits, return it
/// as ended. Ctrl-C (or SIGTERM) asks the daemon to terminate the instance, a second one to
/// kill it, while the output keeps streaming: the app ends the way a foreground program ends,
/// and its last words are not lost. A third one leaves without waiting.
final class ConsoleSession: @unchecked Sendable {
    private let client: AppdClient
    private let lock = NSLock()
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
        Thread.detachNewThread { [self] in
            var set = blocked
            var signal: Int32 = 0
            while sigwait(&set, &signal) == 0 { interrupted() }
        }

        let launched = try client.post(
            AppdClient.path("apps", app, "launch"), body: LaunchRequest(arguments: arguments),
            as: APIInstance.self)
        let early = lock.withLock {
            instance = launched.id
            return interrupts
        }
        if early > 0 { stop(launched.id, kill: early > 1) }

        try client.stream(AppdClient.path("instances", launched.id, "logs", query: ["follow": "1"]))
        { bytes in
            try Output.raw(bytes)
        }
        return try client.get(
            AppdClient.path("instances", launched.id, "wait"), as: APIInstance.self)
    }

    private func interrupted() {
        let (id, count) = lock.withLock {
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
                _ = try client.post(AppdClient.path("instances", id, "kill"), as: APIInstance.self)
            } else {
                _ = try client.post(
                    AppdClient.path("instances", id, "terminate"), body: TerminateRequest(),
                    as: APIInstance.self)
            }
        } catch  where error.code == "notFound" || error.code == "conflict" {
            // Already gone: the stream ends by itself.
        } catch {
            Output.note("appctl: \(Output.text(of: error))")
        }
    }
}
