import ServiceLifecycle
import Supervisor

/// Checks the state root's filesystem against `[Storage] ReclaimCachesBelow` once a minute
/// (one statvfs; installs and launches check it too), and reclaims Caches when it is below
/// (Supervisor+Caches.swift). Stops with the group.
struct CacheReclaimService: Service {
    let supervisor: Supervisor
    static let period = Duration.seconds(60)

    func run() async throws {
        try await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                supervisor.reclaimCachesIfLow()
                try? await Task.sleep(for: Self.period)
            }
        }
    }
}
