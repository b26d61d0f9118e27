import ServiceLifecycle
import Supervisor

/// The supervisor, started (and its instances re-adopted) by `Daemon` before anything is
/// served; stopped last but for the denial reader: running apps are left running for the next
/// start to re-adopt, waiting clients are answered.
struct SupervisorService: Service {
    let supervisor: Supervisor

    func run() async throws {
        await untilGracefulShutdown()
        await supervisor.shutdown()
    }
}

/// The denial reader (the kernel's audit records, Supervisor+Denials.swift), started by `Daemon`
/// before anything is served so that no launch's denials go unread; stopped last.
struct DenialReaderService: Service {
    let supervisor: Supervisor

    func run() async throws {
        await untilGracefulShutdown()
        supervisor.stopDenialLog()
    }
}

/// Suspends until this service's turn to stop comes (or the group is cancelled). A service
/// whose work ended by itself waits here: ServiceGroup takes a service that returns before its
/// turn for one that failed, and would cut the others' shutdown short.
func untilGracefulShutdown() async {
    try? await gracefulShutdown()
}
