import AppContainers
import AppdConfig
import CLinux
import Glibc

/// appd's file descriptors, counted from the caps that bound them (docs/api.md, "Limits").
/// Every fd a user other than root can make the daemon hold comes from a connection
/// (`[API] MaxConnections`, plus the refusals being answered), a live instance or a launch
/// under way (`[Supervisor] MaxInstances`); with appd's own and a reserve for root on top, that
/// is the budget, and `apply` makes it the soft RLIMIT_NOFILE. So the caps refuse users before
/// the kernel would refuse root: `accept` never fails with EMFILE because of what users hold,
/// and root (whom no cap refuses) has `rootReserve` fds past everything they can hold.
struct FDBudget: Equatable, CustomStringConvertible {
    /// The registry and its SQLite readers, the journal, the event loop and its epoll, the
    /// exit and audit watchers, the spawner threads, the metrics.
    static let own = 256
    /// The socket, and the log files a followed log or an attached launch reads (at most 2).
    static let perConnection = 3
    /// Its pidfd, lifecycle channel and bind-filter counter, and its app's namespace template
    /// (mount, root, net and uts: 4 fds, for the console and plain kinds) when every instance
    /// is of another app.
    static let perInstance = 11
    /// A launch under way holds more for a moment: the output pipe, the log folder, the status
    /// file, the channel pair, the journal socket, the profile and filter memfds, the sync pipe
    /// and its copies of the template's fds. Each needs a connection and counts as an instance,
    /// so at most min(MaxConnections, MaxInstances) are under way at once.
    static let perLaunch = 16
    /// root's own connections and launches, which no cap refuses.
    static let rootReserve = 256

    var connections: Int
    var instances: Int
    var launches: Int

    init(api: APISettings, supervisor: SupervisorSettings) {
        connections = api.maxConnections + ConnectionLimits.maxRefusing
        instances = supervisor.maxInstances
        launches = min(api.maxConnections, supervisor.maxInstances)
    }

    /// What users can make appd hold, at most.
    var users: Int {
        Self.perConnection * connections + Self.perInstance * instances + Self.perLaunch * launches
    }

    var total: Int { Self.own + users + Self.rootReserve }

    /// The sum, term by term, as appd logs it at start and appd.service's comment gives it.
    var description: String {
        "\(Self.own) own + \(Self.perConnection) x \(connections) connections ([API] MaxConnections + \(ConnectionLimits.maxRefusing) refusals) + \(Self.perInstance) x \(instances) instances ([Supervisor] MaxInstances) + \(Self.perLaunch) x \(launches) launches under way + \(Self.rootReserve) for root = \(total)"
    }

    /// Sets the soft RLIMIT_NOFILE to the budget (up, or down to it: more would only hide a
    /// miscount), within the hard limit. Returns a warning when the hard limit is lower.
    func apply() -> String? {
        let resource = appd_rlimit_resource("nofile")
        var soft: UInt64 = 0
        var hard: UInt64 = 0
        guard appd_getrlimit(resource, &soft, &hard) == 0 else {
            return "cannot read RLIMIT_NOFILE: \(String(cString: strerror(errno)))"
        }
        let wanted = UInt64(total)
        let target = min(wanted, hard)
        if target != soft, appd_setrlimit(resource, target, hard) != 0 {
            return "cannot set RLIMIT_NOFILE to \(target): \(String(cString: strerror(errno)))"
        }
        guard wanted <= hard else {
            return
                "appd's file descriptor budget is \(total) (\(self)) but its hard RLIMIT_NOFILE is \(hard): users at the caps could leave root no fd; raise LimitNOFILE= in appd.service, or lower MaxConnections or MaxInstances"
        }
        return nil
    }
}
