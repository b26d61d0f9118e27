import AppdAPI
import Logging
import ServiceLifecycle
import Supervisor

/// Logs each launch, exit and denial with its fields (in the journal: APPD_APP, APPD_INSTANCE,
/// APPD_PID); under systemd, READY=1 at the start and a STATUS= line (`systemctl status appd`)
/// on each launch and exit. On graceful shutdown, once the server has stopped: the "stopping"
/// line and STOPPING=1.
struct SystemdStatusService: Service {
    let supervisor: Supervisor
    /// Subscribed by `Daemon` before the server accepts, so that no launch goes unlogged.
    let events: AsyncStream<APIEvent>
    let systemd: SystemdNotifier
    let logger: Logger
    /// Where the API listens, as the status line shows it.
    let serving: String

    func run() async throws {
        systemd.ready(status: line(await supervisor.runningCount()))
        for await event in events.cancelOnGracefulShutdown()
        where event.kind == .launched || event.kind == .exited || event.kind == .denial {
            if event.kind == .denial, let denial = event.denial {
                Daemon.logDenial(denial, logger: logger)
                continue
            }
            guard let id = event.instance else { continue }
            let instance = try? await supervisor.instance(id)
            var metadata: Logger.Metadata = ["app": "\(event.app)", "instance": "\(id)"]
            if let pid = instance?.pid { metadata["pid"] = "\(pid)" }
            if event.kind == .launched {
                logger.info("launched \(event.app) as instance \(id)", metadata: metadata)
            } else {
                let exit = event.exit.map {
                    "\($0.reason.rawValue)" + ($0.code.map { " \($0)" } ?? "")
                        + ($0.signal.map { " signal \($0)" } ?? "")
                }
                logger.info(
                    "\(event.app) instance \(id) ended: \(exit ?? "unknown")", metadata: metadata)
            }
            systemd.status(line(await supervisor.runningCount()))
        }
        await untilGracefulShutdown()
        let running = await supervisor.runningCount()
        logger.info("stopping: \(running) running instance(s) keep running")
        systemd.stopping(status: "stopping; \(running) running instance(s) keep running")
    }

    private func line(_ running: Int) -> String {
        "serving on \(serving); \(running) running instance(s)"
    }
}
