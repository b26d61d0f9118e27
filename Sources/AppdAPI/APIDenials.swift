#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// One thing the sandbox or appd refused an app (`GET /v1/denials`, `appctl denials`,
/// docs/denials.md).
public struct APIDenial: Codable, Sendable, Equatable {
    /// Who refused: the kernel's Landlock or seccomp layer, the bind filter on the instance's
    /// cgroup (network.client apps), the loopback guard on it (apps on the host's network), or
    /// appd itself.
    public enum Source: String, Codable, Sendable {
        case landlock, seccomp, appd
        case bindFilter = "bind-filter"
        case loopbackFilter = "loopback-filter"
    }

    /// Increases by one per recorded denial for the life of the daemon.
    public var seq: Int
    public var time: Date
    public var app: String
    /// Nil for a refusal before any instance existed (a launch appd refused).
    public var instance: String?
    /// The process that was refused, as the host sees it.
    public var pid: Int32?
    public var source: Source
    /// What was refused: Landlock's rights (`fs.read_file`, `net.bind_tcp`, `scope.signal`),
    /// the system call seccomp refused (`mount`, `ptrace`), `bind` (the bind filter), or
    /// appd's check (`launch`, `entitlement`).
    public var what: String
    /// The system call that was refused (its name where appd knows it, else `syscall 123`).
    public var syscall: String?
    /// The file or directory Landlock refused access to.
    public var path: String?
    /// Anything else: appd's reason, the other end of a scoped signal or socket.
    public var detail: String?
    /// The same denial repeated: how many times in a row it happened (1 = once).
    public var count: Int

    public init(
        seq: Int, time: Date, app: String, instance: String?, pid: Int32?, source: Source,
        what: String,
        syscall: String? = nil, path: String? = nil, detail: String? = nil, count: Int = 1
    ) {
        self.seq = seq
        self.time = time
        self.app = app
        self.instance = instance
        self.pid = pid
        self.source = source
        self.what = what
        self.syscall = syscall
        self.path = path
        self.detail = detail
        self.count = count
    }

    /// `fs.read_file /etc/shadow (openat)`, `mount`, `launch: …`.
    public var summary: String {
        var text = what
        if let path { text += " \(path)" }
        if let syscall, syscall != what { text += " (\(syscall))" }
        if let detail { text += ": \(detail)" }
        if count > 1 { text += " x\(count)" }
        return text
    }
}

/// `GET /v1/denials` without `follow`: the recent denials kept, oldest first, and what could
/// not be kept.
public struct APIDenials: Codable, Sendable, Equatable {
    public var denials: [APIDenial]
    /// Denials counted but not recorded, over the per-instance rate limit, for the instances
    /// and apps asked about.
    public var dropped: Int
    /// Whether the kernel reports its denials to appd (audit readable, Landlock ABI ≥ 7); when
    /// false, only appd's own refusals appear. `reason` says why.
    public var kernelReports: Bool
    public var reason: String?

    public init(denials: [APIDenial], dropped: Int, kernelReports: Bool, reason: String? = nil) {
        self.denials = denials
        self.dropped = dropped
        self.kernelReports = kernelReports
        self.reason = reason
    }
}
