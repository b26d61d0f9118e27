import AppdAPI
import AppdBase
import CLinux
import Foundation
import Glibc
import Sandbox
import Synchronization

/// What the sandbox and appd refused each app, as it happens (docs/denials.md): fed by the
/// kernel's audit records (AuditReader) and by appd's own refusals, kept per instance in a
/// bounded ring, rate-limited per instance, published as `denial` events.
///
/// Everything here is bounded whatever an app does: at most `ringSize` denials per instance
/// and per app, at most `maximumTracked` instances and apps, and past `burst` denials an
/// instance gets `refillPerSecond` more a second; the rest are only counted (`dropped`); at
/// most `maximumKept` in all (about 1.8 KiB each at worst: 7 MiB). A
/// denial identical to the instance's previous one within `coalesceSeconds` raises that one's
/// `count` instead of taking a slot.
public final class DenialLog: Sendable {
    public struct Limits: Sendable {
        public var ringSize = 128
        public var burst = 20.0
        public var refillPerSecond = 5.0
        public var coalesceSeconds = 10.0
        public var maximumTracked = 1024
        /// Denials kept across every instance and app: past it the oldest of an ended
        /// instance goes first, else the oldest of the instance that keeps the most.
        public var maximumKept = 4096

        public init() {}
    }

    /// Whose denials a ring holds: an instance's, or an app's own (appd's refusals before an
    /// instance existed: a launch it refused).
    enum Subject: Hashable {
        case instance(String)
        case app(AppID)

        var instance: String? { if case .instance(let id) = self { id } else { nil } }
    }

    struct Tracked {
        var app: AppID
        var uid: UInt32?
        /// The instance's cgroup directories (host paths), to tell its processes by
        /// /proc/PID/cgroup.
        var cgroups: [String] = []
        var live = true
        var endedAt: Date?
        /// The launcher, whose audit session (appd-exec's AuditSession) the app's processes
        /// share; the session once read (nil: not yet, or none of its own).
        var launcherPid: Int32?
        var session: UInt32?
        var ring: [APIDenial] = []
        var total = 0
        var dropped = 0
        var tokens: Double
        var refilledAt: Date
        var lastUsed: Date
    }

    struct State {
        var next = 1
        /// One more on each change of any instance's counts: the instance listing's cache
        /// (GET /v1/instances) is kept per value.
        var changes: UInt64 = 0
        var tracked: [Subject: Tracked] = [:]
        /// Landlock domain id → instance, learned from a record whose process was still there.
        var domains: [String: String] = [:]
        /// Audit session id → instance.
        var sessions: [UInt32: String] = [:]
        /// AUDIT_LOGIN records seen (pid → the session it started), the last 256: a launcher's
        /// may come before the launch has returned its pid, or after the launcher is gone.
        var logins: [Int32: UInt32] = [:]
        var loginOrder: [Int32] = []
        /// Denials per app since the daemon started (for metrics), recorded or dropped.
        var perApp: [AppID: Int] = [:]
        var kernelReports = false
        var reason: String? = "the audit reader has not started"
        /// Records the kernel or the socket lost (ENOBUFS), seen by the reader.
        var socketOverruns = 0
        /// The cgroup filters' counters of each instance (the bind filter of network.client
        /// apps, the loopback guard of apps on the host's network): fd, and refusals reported.
        var filterCounters: [String: [FilterCounter]] = [:]
        /// The sum of the rings' lengths.
        var kept = 0
    }

    /// A cgroup filter's counter of refusals (a BPF map the filter writes, the log polls).
    struct FilterCounter {
        enum Kind { case bind, loopback }
        var kind: Kind
        var fd: Int32
        var reported: UInt64 = 0
    }

    let limits: Limits
    let hub: EventHub
    let state = Mutex(State())

    init(hub: EventHub, limits: Limits = Limits()) {
        self.hub = hub
        self.limits = limits
    }

    // MARK: Reading

    /// The kept denials of an instance, of an app (its instances' and its own), or of all,
    /// oldest first, and how many of theirs were dropped.
    public func list(app: AppID? = nil, instance: String? = nil) -> (
        denials: [APIDenial], dropped: Int
    ) {
        state.withLock { state in
            var denials: [APIDenial] = []
            var dropped = 0
            for (key, tracked) in state.tracked {
                if let instance, key != .instance(instance.lowercased()) { continue }
                if let app, tracked.app != app { continue }
                denials += tracked.ring
                dropped += tracked.dropped
            }
            return (denials.sorted { $0.seq < $1.seq }, dropped)
        }
    }

    /// How many denials an instance had (recorded, repeated and dropped alike), and dropped.
    public func counts(instance: String) -> (total: Int, dropped: Int)? {
        state.withLock { state in
            state.tracked[.instance(instance)].map { ($0.total, $0.dropped) }
        }
    }

    /// Changes so far to the counts `counts(instance:)` reports.
    public var changes: UInt64 { state.withLock { $0.changes } }

    /// Denials per app since the daemon started, recorded or dropped: for `/v1/metrics`.
    public func perAppCounts() -> [AppID: Int] { state.withLock { $0.perApp } }

    /// Whether the kernel's denials reach the log, and why not.
    public var kernelStatus: (reports: Bool, reason: String?) {
        state.withLock { ($0.kernelReports, $0.reason) }
    }

    func setKernelStatus(reports: Bool, reason: String?) {
        state.withLock {
            $0.kernelReports = reports
            $0.reason = reason
        }
    }

    func noteOverrun() { state.withLock { $0.socketOverruns += 1 } }

    public var socketOverruns: Int { state.withLock { $0.socketOverruns } }
}
