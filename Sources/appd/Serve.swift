import AppBundle
import AppContainers
import AppdBase
import AppdServer
import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the daemon: the API on a Unix socket and the supervisor of running apps.",
        discussion: """
            Listens on /run/appd/appd.sock (or <root>/run/appd.sock for a private --root, or \
            --socket, or the socket systemd passes), answers the API of docs/api.md, and \
            supervises the instances it launches. SIGTERM or SIGINT stops it cleanly; running \
            apps keep running and the next 'appd serve' re-adopts them. SIGHUP (systemctl \
            reload appd, appd reload) reads appd.conf again; running apps are not touched.

            One daemon per state root: it locks <root>/daemon.pid for its life, and a second \
            'appd serve' on that root exits naming the pid that holds it. The socket it binds \
            is recorded in <root>/run/appd.socket-path (/run/appd for the system's root), where \
            'appctl --root' finds it.

            Example, a private state root:
              sudo appd serve --root /tmp/appd-demo &
              appctl --root /tmp/appd-demo launch com.example.hello
            """)

    @OptionGroup var options: GlobalOptions

    // Hidden: the daemon tests shorten it to see a slow client dropped without waiting 30 s.
    @Option(help: .hidden)
    var idleTimeout: Double = 30

    // Hidden: where app output goes besides the log files. Default: journald's socket when
    // appd's stderr is the journal (under systemd), else nowhere. The tests point it at a
    // socket of their own.
    @Option(help: .hidden)
    var journalSocket: String?

    func run() throws {
        try options.run {
            guard geteuid() == 0 else {
                throw AppdError(
                    .permissionDenied, "appd serve needs root: it creates sandboxes and cgroups",
                    hint: "run it with sudo, or start it with systemctl start appd.socket")
            }
            guard idleTimeout > 0, idleTimeout <= 86400 else {
                throw AppdError(
                    .invalidConfig,
                    "--idle-timeout \(idleTimeout): give seconds between 0 and 86400")
            }
            umask(0o077)
            let config = try options.loadConfiguration()
            // Under systemd, stderr is a stream to the journal: log there natively instead, so
            // that each entry carries its fields (APPD_APP, APPD_INSTANCE, APPD_PID).
            let toJournal = JournalLogHandler.stderrIsJournal(ProcessInfo.processInfo.environment)
            LoggingSystem.bootstrap { label in
                if toJournal { return JournalLogHandler(label: label) }
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = .info
                return handler
            }
            let logger = Logger(label: "appd")
            let daemon = Daemon(
                options: .init(
                    root: options.stateRoot, config: config, socket: options.socket,
                    idleTimeout: .milliseconds(Int64(idleTimeout * 1000)),
                    journalSocket: journalSocket
                        ?? (toJournal ? "/run/systemd/journal/socket" : nil),
                    configPath: options.configurationSource.path,
                    configExplicit: options.configurationSource.explicit),
                logger: logger)
            let group = ServiceGroup(
                configuration: .init(
                    services: [.init(service: daemon)],
                    gracefulShutdownSignals: [.sigterm, .sigint],
                    logger: logger))
            let outcome = BlockingOutcome()
            Task {
                do { try await group.run() } catch { outcome.set(error) }
                outcome.finish()
            }
            let failure = outcome.wait()
            // What appd said last (why it stopped) reaches the journal before it exits.
            if toJournal { JournalLogHandler.flush() }
            if let error = failure {
                if let error = error as? AppdError { throw error }
                throw AppdError(.io, "appd serve stopped", cause: .from(error))
            }
        }
    }
}

/// Lets the synchronous command wait for the async service group.
final class BlockingOutcome: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var error: (any Error)?

    func set(_ error: any Error) { self.error = error }
    func finish() { done.signal() }

    func wait() -> (any Error)? {
        done.wait()
        return error
    }
}
