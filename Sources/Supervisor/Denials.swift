import AppdAPI
import CLinux
import Foundation
import Glibc
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

    struct Tracked {
        var app: String
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
        /// Instance id, or `app:<bundle id>` for refusals before an instance existed.
        var tracked: [String: Tracked] = [:]
        /// Landlock domain id → instance, learned from a record whose process was still there.
        var domains: [String: String] = [:]
        /// Audit session id → instance.
        var sessions: [UInt32: String] = [:]
        /// AUDIT_LOGIN records seen (pid → the session it started), the last 256: a launcher's
        /// may come before the launch has returned its pid, or after the launcher is gone.
        var logins: [Int32: UInt32] = [:]
        var loginOrder: [Int32] = []
        /// Denials per app since the daemon started (for metrics), recorded or dropped.
        var perApp: [String: Int] = [:]
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
    private let state = Mutex(State())

    init(hub: EventHub, limits: Limits = Limits()) {
        self.hub = hub
        self.limits = limits
    }

    // MARK: Instances

    func register(instance: String, app: String, uid: UInt32, cgroups: [String]) {
        state.withLock { state in
            state.tracked[instance] = Tracked(
                app: app, uid: uid, cgroups: cgroups, tokens: limits.burst, refilledAt: Date(),
                lastUsed: Date())
            Self.evict(&state, keep: limits.maximumTracked)
        }
    }

    /// Known once the launcher has its cgroup; registered before, so that an app quicker than
    /// its launch's return is not missed.
    func setCgroups(instance: String, cgroups: [String], launcherPid: Int32? = nil) {
        state.withLock { state in
            state.tracked[instance]?.cgroups = cgroups
            state.tracked[instance]?.launcherPid = launcherPid
            learnSession(instance, &state)
        }
    }

    /// No session: audit's "unset" (4294967295).
    static let noSession = UInt32.max
    /// The daemon's own session: a launcher that could not start one of its own has it.
    static let ownSession = readSession(getpid())

    static func readSession(_ pid: Int32) -> UInt32? {
        procText("/proc/\(pid)/sessionid", limit: 16).flatMap {
            UInt32($0.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    /// The first `limit` bytes of a /proc file, in one read; nil if it cannot be read or is
    /// empty (the process is gone).
    static func procText(_ path: String, limit: Int) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: limit)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count], as: UTF8.self)
    }

    /// The instance whose audit session `session` is, reading the sessions of launchers not
    /// read yet. Nil: not one of ours.
    private func instance(session: UInt32, _ state: inout State) -> String? {
        if let id = state.sessions[session] { return id }
        for (id, tracked) in state.tracked where tracked.live && tracked.session == nil {
            learnSession(id, &state)
        }
        if state.sessions.count > 4 * limits.maximumTracked { state.sessions.removeAll() }
        return state.sessions[session]
    }

    /// The session of an instance's launcher, once it has one of its own: from its
    /// AUDIT_LOGIN record, else from /proc.
    private func learnSession(_ id: String, _ state: inout State) {
        guard let tracked = state.tracked[id], tracked.session == nil,
            let pid = tracked.launcherPid,
            let read = state.logins[pid] ?? Self.readSession(pid), read != Self.noSession,
            read != Self.ownSession
        else { return }
        state.tracked[id]?.session = read
        state.sessions[read] = id
    }

    /// An AUDIT_LOGIN record: process `pid` started audit session `session`.
    func noteLogin(pid: Int32, session: UInt32) {
        state.withLock { state in
            if state.logins.updateValue(session, forKey: pid) == nil {
                state.loginOrder.append(pid)
            }
            if state.loginOrder.count > 256 {
                state.logins.removeValue(forKey: state.loginOrder.removeFirst())
            }
            if let id = state.tracked.first(where: {
                $0.value.launcherPid == pid && $0.value.session == nil
            })?.key {
                learnSession(id, &state)
            }
        }
    }

    /// A launch that failed: nothing of it is kept.
    func forget(instance: String) {
        let counters = state.withLock { state in
            state.kept -= state.tracked.removeValue(forKey: instance)?.ring.count ?? 0
            return state.filterCounters.removeValue(forKey: instance) ?? []
        }
        for counter in counters { close(counter.fd) }
    }

    /// A cgroup filter's counter of an instance: polled, each new refusal reported as a
    /// `bind-filter` or `loopback-filter` denial. The log owns the fd from now on.
    func watch(_ kind: FilterCounter.Kind, instance: String, counter: Int32) {
        let replaced = state.withLock { state -> FilterCounter? in
            var counters = state.filterCounters[instance] ?? []
            let old = counters.firstIndex { $0.kind == kind }.map { counters.remove(at: $0) }
            counters.append(FilterCounter(kind: kind, fd: counter))
            state.filterCounters[instance] = counters
            return old
        }
        if let replaced { close(replaced.fd) }
    }

    /// Reads every filter's counter (a map lookup each) and records what is new: the filters
    /// only count, so a burst of refusals between two polls is one denial with its count,
    /// naming the last port.
    func pollFilterCounters() {
        let all = state.withLock { $0.filterCounters }
        for (instance, counters) in all {
            for counter in counters { poll(instance: instance, counter: counter) }
        }
    }

    private func poll(instance: String, counter: FilterCounter) {
        var refused: UInt64 = 0
        var port: UInt32 = 0
        var type: UInt32 = 0
        var family: UInt32 = 0
        let read =
            switch counter.kind {
            case .bind: appd_bind_counter_read(counter.fd, &refused, &port, &type)
            case .loopback: appd_connect_counter_read(counter.fd, &refused, &port, &type, &family)
            }
        guard read == 0, refused > counter.reported else { return }
        let app: String? = state.withLock { state in
            guard let index = state.filterCounters[instance]?.firstIndex(where: { $0.kind == counter.kind })
            else { return nil }
            state.filterCounters[instance]?[index].reported = refused
            return state.tracked[instance]?.app
        }
        guard let app else { return }
        let socket =
            type == UInt32(SOCK_DGRAM.rawValue)
            ? "UDP" : type == UInt32(SOCK_STREAM.rawValue) ? "TCP" : "socket"
        let count = Int(clamping: refused - counter.reported)
        switch counter.kind {
        case .bind:
            record(
                app: app, instance: instance, source: .bindFilter, what: "bind", syscall: "bind",
                detail: "\(socket) port \(port)", count: count)
        case .loopback:
            // connect(), or sendto()/sendmsg() of a UDP socket: the filter counts both.
            // The filter keeps the family, not the address: any of 127.0.0.0/8, 0.0.0.0/8 (v4),
            // ::1, :: or a v4-mapped one of those (v6).
            let address = family == UInt32(AF_INET6) ? "IPv6 loopback" : "IPv4 loopback"
            record(
                app: app, instance: instance, source: .loopbackFilter, what: "connect",
                syscall: type == UInt32(SOCK_DGRAM.rawValue) ? "connect/sendmsg" : "connect",
                detail: "\(socket) \(address) port \(port)", count: count)
        }
    }

    func ended(instance: String) {
        // Its last refusals, then the counters go (the filters go with the cgroup).
        if let counters = state.withLock({ $0.filterCounters[instance] }) {
            for counter in counters { poll(instance: instance, counter: counter) }
            let removed = state.withLock { $0.filterCounters.removeValue(forKey: instance) } ?? []
            for counter in removed { close(counter.fd) }
        }
        state.withLock {
            $0.tracked[instance]?.live = false
            $0.tracked[instance]?.endedAt = Date()
        }
    }

    /// Forgets the oldest ended instances (and app entries) beyond `keep`.
    private static func evict(_ state: inout State, keep: Int) {
        guard state.tracked.count > keep else { return }
        let candidates = state.tracked.filter { !$0.value.live }.sorted {
            $0.value.lastUsed < $1.value.lastUsed
        }
        for (key, _) in candidates.prefix(state.tracked.count - keep) {
            state.kept -= state.tracked.removeValue(forKey: key)?.ring.count ?? 0
        }
        if state.domains.count > 4 * keep { state.domains.removeAll() }
    }

    /// Drops kept denials beyond `keep` in all: an ended instance's oldest first, else the
    /// oldest of the instance that keeps the most (the one flooding).
    private static func trim(_ state: inout State, keep: Int) {
        while state.kept > keep {
            let ended = state.tracked.filter { !$0.value.live && !$0.value.ring.isEmpty }
                .min { ($0.value.ring.first?.seq ?? 0) < ($1.value.ring.first?.seq ?? 0) }
            guard
                let key = ended?.key
                    ?? state.tracked.max(by: { $0.value.ring.count < $1.value.ring.count })?.key,
                state.tracked[key]?.ring.isEmpty == false
            else { return }
            state.tracked[key]?.ring.removeFirst()
            state.kept -= 1
        }
    }

    /// The live instance a process belongs to: by its cgroup while it exists; else, when its
    /// uid (each app has its own) has exactly one live instance, that one; else by the
    /// Landlock domain seen before. Nil for a process of no instance (another sandbox on the
    /// host) — its records are not ours.
    func resolve(pid: Int32?, uid: UInt32?, domain: String?, session: UInt32? = nil) -> (
        app: String, instance: String
    )? {
        let groups = pid.flatMap(Self.cgroupPaths(of:))
        return state.withLock { state -> (String, String)? in
            if let groups {
                for group in groups {
                    guard let last = group.split(separator: "/").last,
                        let tracked = state.tracked[String(last)],
                        tracked.cgroups.contains(where: { $0.hasSuffix(group) })
                    else { continue }
                    if let domain { state.domains[domain] = String(last) }
                    return (tracked.app, String(last))
                }
            }
            // A session of its own (AuditSession in appd-exec) names the instance for certain; a
            // session that is not the daemon's and none of its instances' is another's.
            if let session, session != Self.noSession, session != Self.ownSession {
                guard let id = instance(session: session, &state), let tracked = state.tracked[id]
                else { return nil }
                if let domain { state.domains[domain] = id }
                return (tracked.app, id)
            }
            if let domain, let id = state.domains[domain], let tracked = state.tracked[id] {
                return (tracked.app, id)
            }
            // By uid only for records without a session of their own (appd-exec could not
            // start one), and only to an instance without one either: a sessionless process
            // of that uid is not one of an instance that has a session.
            if let uid {
                for (id, tracked) in state.tracked where tracked.uid == uid && tracked.live {
                    learnSession(id, &state)
                }
                // A live instance of the app first; else one that just ended (its records may
                // arrive after its exit was handled). Two of either: the uid cannot tell.
                let mine = state.tracked.filter { $0.value.uid == uid && $0.value.session == nil }
                let live = mine.filter { $0.value.live }
                let recent = mine.filter {
                    $0.value.endedAt.map { -$0.timeIntervalSinceNow < 5 } ?? false
                }
                let candidates = live.isEmpty ? recent : live
                if candidates.count == 1, let (id, tracked) = candidates.first {
                    if let domain { state.domains[domain] = id }
                    return (tracked.app, id)
                }
            }
            return nil
        }
    }

    /// The cgroup paths of a process (one per hierarchy), or nil once it is gone.
    static func cgroupPaths(of pid: Int32) -> [String]? {
        procText("/proc/\(pid)/cgroup", limit: 4096)?.split(separator: "\n").compactMap { line in
            // hierarchy-ID:controllers:path
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, parts[2].count > 1 else { return nil }
            return String(parts[2])
        }
    }

    // MARK: Recording

    /// Records one denial (rate limit and coalescing permitting) and publishes it. `instance`
    /// nil: a refusal of the app as such (a launch appd refused).
    @discardableResult
    func record(
        app: String, instance: String?, pid: Int32? = nil, source: APIDenial.Source, what: String,
        syscall: String? = nil, path: String? = nil, detail: String? = nil, count: Int = 1,
        now: Date = Date()
    ) -> APIDenial? {
        let count = max(1, count)
        let key = instance ?? "app:\(app.lowercased())"
        let recorded = state.withLock { state -> APIDenial? in
            state.changes &+= 1
            state.perApp[app, default: 0] += count
            if state.perApp.count > limits.maximumTracked * 4 { state.perApp.removeAll() }
            var tracked =
                state.tracked[key]
                ?? Tracked(
                    app: app, uid: nil, live: instance == nil, tokens: limits.burst,
                    refilledAt: now, lastUsed: now)
            defer {
                state.tracked[key] = tracked
                Self.evict(&state, keep: limits.maximumTracked)
                Self.trim(&state, keep: limits.maximumKept)
            }
            tracked.total += count
            tracked.lastUsed = now
            if var last = tracked.ring.last, last.pid == pid || last.source == .appd,
                last.source == source,
                last.what == what, last.path == path, last.syscall == syscall,
                last.detail == detail,
                now.timeIntervalSince(last.time) < limits.coalesceSeconds
            {
                last.count += count
                tracked.ring[tracked.ring.count - 1] = last
                return nil
            }
            let elapsed = max(0, now.timeIntervalSince(tracked.refilledAt))
            tracked.tokens = min(limits.burst, tracked.tokens + elapsed * limits.refillPerSecond)
            tracked.refilledAt = now
            guard tracked.tokens >= 1 else {
                tracked.dropped += count
                return nil
            }
            tracked.tokens -= 1
            let denial = APIDenial(
                seq: state.next, time: now, app: app, instance: instance, pid: pid, source: source,
                what: Self.clip(what, 128) ?? "?", syscall: Self.clip(syscall, 64),
                path: Self.clip(path, 1024),
                detail: Self.clip(detail, 512), count: count)
            state.next += 1
            tracked.ring.append(denial)
            state.kept += 1
            if tracked.ring.count > limits.ringSize {
                state.kept -= tracked.ring.count - limits.ringSize
                tracked.ring.removeFirst(tracked.ring.count - limits.ringSize)
            }
            return denial
        }
        if let recorded {
            hub.publish { seq in
                APIEvent(
                    seq: seq, time: recorded.time, kind: .denial, app: recorded.app,
                    instance: recorded.instance,
                    detail: recorded.summary, denial: recorded)
            }
        }
        return recorded
    }

    private static func clip(_ text: String?, _ bytes: Int) -> String? {
        guard let text else { return nil }
        return text.utf8.count <= bytes
            ? text : String(decoding: text.utf8.prefix(bytes), as: UTF8.self)
    }

    // MARK: Reading

    /// The kept denials of an instance, of an app (its instances' and its own), or of all,
    /// oldest first, and how many of theirs were dropped.
    public func list(app: String? = nil, instance: String? = nil) -> (
        denials: [APIDenial], dropped: Int
    ) {
        state.withLock { state in
            var denials: [APIDenial] = []
            var dropped = 0
            for (key, tracked) in state.tracked {
                if let instance, key != instance.lowercased() { continue }
                if let app, tracked.app.caseInsensitiveCompare(app) != .orderedSame { continue }
                denials += tracked.ring
                dropped += tracked.dropped
            }
            return (denials.sorted { $0.seq < $1.seq }, dropped)
        }
    }

    /// How many denials an instance had (recorded, repeated and dropped alike), and dropped.
    public func counts(instance: String) -> (total: Int, dropped: Int)? {
        state.withLock { state in state.tracked[instance].map { ($0.total, $0.dropped) } }
    }

    /// Changes so far to the counts `counts(instance:)` reports.
    public var changes: UInt64 { state.withLock { $0.changes } }

    /// Denials per app since the daemon started, recorded or dropped: for `/v1/metrics`.
    public func perAppCounts() -> [String: Int] { state.withLock { $0.perApp } }

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
