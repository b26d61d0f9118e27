import ServiceLifecycle
import UnixSignals

/// `systemctl reload appd` (ExecReload= sends SIGHUP): appd.conf read again for each SIGHUP. A
/// refused file is logged and reported in STATUS=, and the daemon carries on with the settings
/// it had. SIGHUP is trapped by `Daemon` before anything can take long, since its default
/// action ends the process.
struct ReloadService: Service {
    let hangups: UnixSignalsSequence
    let reloader: ConfigurationReloader

    func run() async throws {
        for await _ in hangups.cancelOnGracefulShutdown() {
            _ = try? await reloader.reload()
        }
        await untilGracefulShutdown()
    }
}
