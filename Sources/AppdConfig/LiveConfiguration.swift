import Synchronization

/// The daemon's configuration in force, owned by the daemon and handed to each part that reads
/// it (the state root, the supervisor, the router, the installer, reload): `appd reload`
/// (SIGHUP) swaps it as a whole, so a reader gets either the old or the new file, never a mix.
/// Read `current` once per operation.
public final class LiveConfiguration: Sendable {
    private let value: Mutex<AppdConfiguration>

    public init(_ configuration: AppdConfiguration) { value = Mutex(configuration) }

    public var current: AppdConfiguration { value.withLock { $0 } }

    /// Puts `configuration` in force for every later operation (installs, launches, checks);
    /// what is running keeps what it started with.
    public func replace(with configuration: AppdConfiguration) {
        value.withLock { $0 = configuration }
    }
}
