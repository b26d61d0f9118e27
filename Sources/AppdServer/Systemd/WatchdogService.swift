import NIOCore
import ServiceLifecycle

/// systemd's watchdog (`WatchdogSec=`): WATCHDOG=1 every half interval, from the event loop
/// that answers the API. If that loop hangs the pings stop and systemd restarts appd (the apps
/// stay: KillMode=process). Without a watchdog it only waits for the shutdown.
struct WatchdogService: Service {
    let systemd: SystemdNotifier
    let eventLoop: any EventLoop

    func run() async throws {
        guard let interval = systemd.watchdogIntervalMicroseconds else {
            await untilGracefulShutdown()
            return
        }
        let pings = eventLoop.scheduleRepeatedTask(
            initialDelay: .zero, delay: .microseconds(interval)
        ) { [systemd] _ in
            systemd.watchdog()
        }
        await untilGracefulShutdown()
        pings.cancel()
    }
}
