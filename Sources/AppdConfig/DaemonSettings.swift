import Glibc

/// Who a right is given to: `root` (always), `*` (anyone who can open the socket),
/// `@group` (members of a group, by primary or supplementary gid), or a user name.
public struct AccessList: Sendable, Equatable, CustomStringConvertible {
    public var everyone = false
    public var groups: [String] = []
    public var users: [String] = []

    public init(everyone: Bool = false, groups: [String] = [], users: [String] = []) {
        self.everyone = everyone
        self.groups = groups
        self.users = users
    }

    public init(_ text: String) throws(AccessListError) {
        for word in text.split(whereSeparator: \.isWhitespace).map(String.init) {
            if word == "*" {
                everyone = true
            } else if word.hasPrefix("@") {
                guard word.count > 1 else { throw AccessListError(word: word) }
                groups.append(String(word.dropFirst()))
            } else if word != "root" {
                users.append(word)
            }
        }
    }

    public var description: String {
        ((everyone ? ["*"] : []) + groups.map { "@\($0)" } + users).joined(separator: " ")
    }
}

public struct AccessListError: Error { public var word: String }

/// `[API]`: the daemon's socket and who may do what through it (docs/api.md).
public struct APISettings: Sendable, Equatable {
    /// Empty: `/run/appd/appd.sock` for the system's state root, `<root>/run/appd.sock` else.
    public var socket = ""
    public var socketMode: mode_t = 0o660
    /// The socket's group; empty: root's. A missing group is an error at start.
    public var socketGroup = "appd"
    public var readAllowed = AccessList(everyone: true)
    public var controlAllowed = AccessList(groups: ["appd"])
    public var adminAllowed = AccessList(groups: ["appd-admin"])
    /// Largest JSON request body.
    public var maxRequestBytes: Int64 = 1 << 20
    /// Connections held at once, in all (docs/api.md, "Limits"; LimitNOFILE= in appd.service
    /// is sized for these).
    public var maxConnections = 512
    /// Of `maxConnections`, the ones only the admin group may use (root is never refused).
    public var reservedConnections = 32
    /// Connections one uid (other than root) may hold.
    public var maxConnectionsPerUser = 64
    /// Event streams, followed logs and waits one uid (other than root) may hold.
    public var maxStreamsPerUser = 16
    /// Seconds a request's head and body may take to arrive in all, from when appd starts
    /// waiting for it (root's requests excepted): a client that trickles a body cannot hold its
    /// connection longer than this.
    public var requestTimeout = 120

    public init() {}

}

/// `[Supervisor]`: running instances.
public struct SupervisorSettings: Sendable, Equatable {
    /// Seconds between SIGTERM and killing the instance's cgroup.
    public var terminateGracePeriod: Double = 5
    /// An instance's log is rotated to `<instance>.log.1` past this size (so one instance
    /// keeps at most twice this).
    public var logMaxBytes: Int64 = 1 << 20
    /// Exited instances remembered (`appctl ps --all`), with their logs.
    public var keepExited = 100
    /// Where instance cgroups go. Empty: under systemd, below the sibling unit appd-apps.service
    /// on cgroup v2 and `apps` below appd's own cgroup on hybrid/v1 hosts; `/appd` from the
    /// root of each hierarchy without systemd (`Cgroups.defaultParent`).
    public var cgroupParent = ""
    /// The denial log (docs/denials.md): appd turns audit on, asks the kernel to audit each
    /// app's Landlock and seccomp refusals and reads them. `no`: only appd's own refusals are
    /// logged and audit is left as it is.
    public var denialLog = true
    /// Live instances (starting, running, suspended) at once, in all; past it launches by any
    /// uid but root are refused (503). Each holds daemon fds, so this sizes appd's fd budget.
    public var maxInstances = 512
    /// Live instances one uid (other than root) may have launched (429 past it).
    public var maxInstancesPerUser = 128
    /// Live instances of one app (root's count too); past it launches by uids other than root
    /// are refused (429).
    public var maxInstancesPerApp = 128

    public init() {}

}
