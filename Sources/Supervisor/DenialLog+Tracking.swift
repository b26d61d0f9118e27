import AppdAPI
import AppdBase
import CLinux
import Foundation
import Glibc
import Sandbox
import Synchronization

/// Which instance a denial belongs to: the instances the log tracks (registered by a launch,
/// given their cgroups and launcher, ended), their audit sessions, and the cgroup filters'
/// counters it polls. Bounded by `Limits.maximumTracked` (evict) and `maximumKept` (trim).
extension DenialLog {
    // MARK: Instances

    func register(instance: String, app: AppID, uid: UInt32, cgroups: [String]) {
        state.withLock { state in
            state.tracked[.instance(instance)] = Tracked(
                app: app, uid: uid, cgroups: cgroups, tokens: limits.burst, refilledAt: Date(),
                lastUsed: Date())
            Self.evict(&state, keep: limits.maximumTracked)
        }
    }

    /// Known once the launcher has its cgroup; registered before, so that an app quicker than
    /// its launch's return is not missed.
    func setCgroups(instance: String, cgroups: [String], launcherPid: Int32? = nil) {
        state.withLock { state in
            state.tracked[.instance(instance)]?.cgroups = cgroups
            state.tracked[.instance(instance)]?.launcherPid = launcherPid
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
    func instance(session: UInt32, _ state: inout State) -> String? {
        if let id = state.sessions[session] { return id }
        for (key, tracked) in state.tracked where tracked.live && tracked.session == nil {
            if let id = key.instance { learnSession(id, &state) }
        }
        if state.sessions.count > 4 * limits.maximumTracked { state.sessions.removeAll() }
        return state.sessions[session]
    }

    /// The session of an instance's launcher, once it has one of its own: from its
    /// AUDIT_LOGIN record, else from /proc.
    func learnSession(_ id: String, _ state: inout State) {
        guard let tracked = state.tracked[.instance(id)], tracked.session == nil,
            let pid = tracked.launcherPid,
            let read = state.logins[pid] ?? Self.readSession(pid), read != Self.noSession,
            read != Self.ownSession
        else { return }
        state.tracked[.instance(id)]?.session = read
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
            })?.key.instance {
                learnSession(id, &state)
            }
        }
    }

    /// A launch that failed: nothing of it is kept.
    func forget(instance: String) {
        let counters = state.withLock { state in
            state.kept -= state.tracked.removeValue(forKey: .instance(instance))?.ring.count ?? 0
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
        let app: AppID? = state.withLock { state in
            guard
                let index = state.filterCounters[instance]?.firstIndex(where: {
                    $0.kind == counter.kind
                })
            else { return nil }
            state.filterCounters[instance]?[index].reported = refused
            return state.tracked[.instance(instance)]?.app
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
            $0.tracked[.instance(instance)]?.live = false
            $0.tracked[.instance(instance)]?.endedAt = Date()
        }
    }

    /// Forgets the oldest ended instances (and app entries) beyond `keep`, down to an eighth
    /// below it: a daemon past `keep` sorts its ended entries once every `keep / 8` launches,
    /// not on every launch (perf: a copy and sort of 1,024 entries per launch was 10 % of the
    /// daemon's launch work after a thousand launches).
    static func evict(_ state: inout State, keep: Int) {
        guard state.tracked.count > keep else { return }
        var ended: [(key: Subject, lastUsed: Date)] = []
        for (key, value) in state.tracked where !value.live { ended.append((key, value.lastUsed)) }
        ended.sort { $0.lastUsed < $1.lastUsed }
        for (key, _) in ended.prefix(state.tracked.count - (keep - keep / 8)) {
            state.kept -= state.tracked.removeValue(forKey: key)?.ring.count ?? 0
        }
        if state.domains.count > 4 * keep { state.domains.removeAll() }
    }

    /// Drops kept denials beyond `keep` in all: an ended instance's oldest first, else the
    /// oldest of the instance that keeps the most (the one flooding).
    static func trim(_ state: inout State, keep: Int) {
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
}
