import AppContainers
import AppdAPI
import AppdBase
import AppdConfig
import CLinux
import Foundation
import Glibc
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Supervisor
import UnixSignals

/// `appd serve`: prepares, in order, what must exist before the first request (the state
/// root's lock, the store, the supervisor and its re-adopted instances, the denial reader, the
/// bound socket), then runs the long-lived parts as a `ServiceGroup` (DaemonServices/,
/// Systemd/): the API server, the supervisor, the denial reader, reloads, systemd status and
/// watchdog. On SIGTERM it stops accepting, ends streams, and exits; running apps are left
/// running for the next start to re-adopt.
public final class Daemon: Service {
    public struct Options: Sendable {
        public var root: StateRoot
        public var config: AppdConfiguration
        /// `--socket`; else `Socket=` of `[API]`; else the state root's default.
        public var socket: String?
        /// How long a connection may keep the daemon waiting for the next part of a request.
        public var idleTimeout: Duration
        /// journald's native socket, to which each instance's output goes as well (under
        /// systemd); nil: the log files only.
        public var journalSocket: String?
        /// The file `config` was read from, read again on SIGHUP and `POST /v1/reload`;
        /// `explicit`: named by --config or APPD_CONFIG, so it must exist.
        public var configPath: String
        public var configExplicit: Bool

        public init(
            root: StateRoot, config: AppdConfiguration, socket: String? = nil,
            idleTimeout: Duration = .seconds(30),
            journalSocket: String? = nil, configPath: String = AppdConfiguration.defaultPath,
            configExplicit: Bool = false
        ) {
            self.root = root
            self.config = config
            self.socket = socket
            self.idleTimeout = idleTimeout
            self.journalSocket = journalSocket
            self.configPath = configPath
            self.configExplicit = configExplicit
        }
    }

    let options: Options
    let logger: Logger
    /// Called once the socket listens (tests and `appd serve --ready-fd`).
    let onReady: @Sendable (String) -> Void

    public init(
        options: Options, logger: Logger, onReady: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.options = options
        self.logger = logger
        self.onReady = onReady
    }

    public func run() async throws {
        // glibc's malloc, tuned for a daemon that lives long and installs in bursts: a fixed
        // mmap threshold (setting one turns off the dynamic threshold, which after the first
        // freed 1 MiB copy buffer served every later one from the heap, where it stayed), and
        // two arenas rather than one per thread that ever allocated, each keeping what was
        // freed in it (bench-api: concurrent installs).
        _ = appd_tune_malloc(256 << 10, 2)
        // Before any fd is opened: the caps are what keeps users from holding root's fds, and
        // the limit is sized from them.
        let budget = FDBudget(api: options.config.api, supervisor: options.config.supervisor)
        if let warning = budget.apply() {
            logger.warning("\(warning)")
        } else {
            logger.info("file descriptors: \(budget)")
        }
        // Before anything reads the root: a second daemon would recover the first one's
        // installs in progress and adopt its instances.
        let lock = try DaemonLock(options.root)
        defer { withExtendedLifetime(lock) {} }
        let environment = ProcessInfo.processInfo.environment
        let systemd = SystemdNotifier()
        // Trapped before anything else can take long: SIGHUP's default action ends the process.
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        // The settings in force, owned here and handed to each part that reads them.
        let configuration = LiveConfiguration(options.config)
        let store = try AppStore(
            root: options.root, configuration: configuration, access: .readWrite)
        let runtime = APISocket.runtimeDirectory(stateRoot: options.root.path)
        let driver = try Supervisor.cgroupDriver(
            options.config.supervisor, underSystemd: environment["INVOCATION_ID"] != nil)
        let spawner = try SandboxSpawner(
            store: store, driver: driver, configuration: options.config)
        let supervisor = try Supervisor(
            catalog: store, spawner: spawner, driver: driver, configuration: configuration,
            runtimeDirectory: runtime, stateRoot: store.root.path)
        if let path = options.journalSocket { await supervisor.forwardOutput(toJournal: path) }
        spawner.templates.onFailure { [logger] message in logger.warning("\(message)") }
        supervisor.cacheReclaims.onReclaim { [logger] app, line in
            logger.notice("\(line)", metadata: ["app": "\(app)"])
        }
        let report = await supervisor.start()
        await supervisor.startDenialLog()
        if let reason = supervisor.denials.kernelStatus.reason {
            logger.warning("denial log: \(reason)")
        }
        if !report.adopted.isEmpty || !report.ended.isEmpty {
            logger.info(
                "re-adopted \(report.adopted.count) running instance(s); \(report.ended.count) ended while appd was down",
                metadata: ["adopted": "\(report.adopted)", "ended": "\(report.ended)"])
        }
        let adopted = SystemdNotifier.listeningSocket()
        let path =
            options.socket
            ?? (options.config.api.socket.isEmpty
                ? "\(runtime)/appd.sock" : options.config.api.socket)
        let shown = adopted.map { "fd \($0) from systemd" } ?? path
        let reloader = ConfigurationReloader(
            source: .init(path: options.configPath, explicit: options.configExplicit), store: store,
            configuration: configuration,
            supervisor: supervisor, systemd: systemd, logger: logger,
            statusLine: {
                "serving on \(shown); \(await supervisor.runningCount()) running instance(s)"
            })
        let router = Router(
            store: store, configuration: configuration, supervisor: supervisor,
            installer: try Installer(store: store, configuration: configuration, logger: logger),
            reloader: reloader)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = HTTPServer(
            router: router, group: group, idleTimeout: TimeAmount(options.idleTimeout),
            requestTimeout: .seconds(Int64(options.config.api.requestTimeout)))

        let listener = try await server.bind(
            path: adopted == nil ? path : nil, adopted: adopted,
            mode: options.config.api.socketMode,
            groupID: adopted == nil
                ? try Self.socketGroup(options.config.api.socketGroup, logger: logger) : nil)
        // Where clients of `--root` find this daemon when its socket is not the root's default.
        let record = APISocket.socketRecordPath(runtimeDirectory: runtime)
        if adopted == nil {
            do {
                try Self.writeSocketRecord(path, to: record)
            } catch {
                logger.warning(
                    "cannot record the socket in \(record): \(error); clients of --root \(options.root.path) will look for \(runtime)/appd.sock"
                )
            }
        } else {
            unlink(record)
        }
        logger.info("appd \(AppdVersion.current) serving \(options.root.path) on \(shown)")
        onReady(shown)
        // Subscribed before the server accepts: no launch goes unlogged.
        let events = supervisor.events()
        // Started in this order, each in its own task; on graceful shutdown (SIGTERM, through
        // the ServiceGroup of `appd serve`, which this one follows) stopped in reverse, each
        // after the one before it has ended: the server stops accepting and answers what waits,
        // then the "stopping" status, the watchdog, reloads, the supervisor, the denial reader.
        let services = ServiceGroup(
            configuration: .init(
                services: [
                    .init(service: DenialReaderService(supervisor: supervisor)),
                    .init(service: SupervisorService(supervisor: supervisor)),
                    .init(service: ReloadService(hangups: hangups, reloader: reloader)),
                    .init(service: CacheReclaimService(supervisor: supervisor)),
                    .init(service: WatchdogService(systemd: systemd, eventLoop: group.next())),
                    .init(
                        service: SystemdStatusService(
                            supervisor: supervisor, events: events, systemd: systemd,
                            logger: logger, serving: shown)),
                    .init(
                        service: HTTPServerService(
                            server: server, listener: listener, supervisor: supervisor)),
                ],
                logger: logger))
        try await services.run()
        if adopted == nil {
            unlink(path)
            unlink(record)
        }
        try await group.shutdownGracefully()
        systemd.flush()
    }

    /// A denial in the journal: APPD_APP, APPD_INSTANCE, APPD_PID, APPD_SOURCE, APPD_RIGHT
    /// (what was refused), APPD_SYSCALL, APPD_PATH. Rate-limited upstream, as the log is.
    static func logDenial(_ denial: APIDenial, logger: Logger) {
        var metadata: Logger.Metadata = [
            "app": "\(denial.app)", "source": "\(denial.source.rawValue)",
            "right": "\(denial.what)",
        ]
        if let instance = denial.instance { metadata["instance"] = "\(instance)" }
        if let pid = denial.pid { metadata["pid"] = "\(pid)" }
        if let syscall = denial.syscall { metadata["syscall"] = "\(syscall)" }
        if let path = denial.path { metadata["path"] = "\(path)" }
        let whom = denial.instance.map { "\(denial.app) instance \($0)" } ?? denial.app
        logger.warning(
            "\(whom) denied by \(denial.source.rawValue): \(denial.summary)", metadata: metadata)
    }

    /// Writes the socket's path (absolute) to `record`, mode 0644 (clients of any user read
    /// it), by a rename so that a reader never sees half of it.
    static func writeSocketRecord(_ socket: String, to record: String) throws {
        let absolute =
            socket.hasPrefix("/") ? socket : FileManager.default.currentDirectoryPath + "/" + socket
        let temporary = record + ".new"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw AppdError.system("create \(temporary)") }
        let bytes = Array((absolute + "\n").utf8)
        // fchmod: the umask (077 in appd serve) applied to open's mode.
        let written =
            bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count
            && fchmod(fd, 0o644) == 0
        let code = errno
        close(fd)
        guard written else {
            unlink(temporary)
            throw AppdError.system("write \(temporary)", errno: code)
        }
        guard rename(temporary, record) == 0 else {
            unlink(temporary)
            throw AppdError.system("rename \(temporary) to \(record)")
        }
    }

    /// The socket's group; a group that does not exist leaves the socket to root alone.
    static func socketGroup(_ name: String, logger: Logger) throws -> gid_t? {
        guard !name.isEmpty else { return nil }
        guard let group = getgrnam(name) else {
            logger.warning(
                "[API] SocketGroup=\(name): no such group; only root can use the socket",
                metadata: [
                    "hint": "create it (groupadd --system \(name)) or set SocketGroup= in appd.conf"
                ])
            return nil
        }
        return group.pointee.gr_gid
    }
}
