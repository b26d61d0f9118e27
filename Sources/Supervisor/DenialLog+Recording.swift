import AppdAPI
import AppdBase
import CLinux
import Foundation
import Glibc
import Sandbox
import Synchronization

/// A denial from its source to the ring: the process it names attributed to an instance
/// (`resolve`), then recorded, rate-limited and coalesced per instance, and published.
extension DenialLog {
    /// The live instance a process belongs to: by its cgroup while it exists; else, when its
    /// uid (each app has its own) has exactly one live instance, that one; else by the
    /// Landlock domain seen before. Nil for a process of no instance (another sandbox on the
    /// host) — its records are not ours.
    func resolve(pid: Int32?, uid: UInt32?, domain: String?, session: UInt32? = nil) -> (
        app: AppID, instance: String
    )? {
        let groups = pid.flatMap(Self.cgroupPaths(of:))
        return state.withLock { state -> (AppID, String)? in
            if let groups {
                for group in groups {
                    guard let last = group.split(separator: "/").last,
                        let tracked = state.tracked[.instance(String(last))],
                        tracked.cgroups.contains(where: { $0.hasSuffix(group) })
                    else { continue }
                    if let domain { state.domains[domain] = String(last) }
                    return (tracked.app, String(last))
                }
            }
            // A session of its own (AuditSession in appd-exec) names the instance for certain; a
            // session that is not the daemon's and none of its instances' is another's.
            if let session, session != Self.noSession, session != Self.ownSession {
                guard let id = instance(session: session, &state),
                    let tracked = state.tracked[.instance(id)]
                else { return nil }
                if let domain { state.domains[domain] = id }
                return (tracked.app, id)
            }
            if let domain, let id = state.domains[domain],
                let tracked = state.tracked[.instance(id)]
            {
                return (tracked.app, id)
            }
            // By uid only for records without a session of their own (appd-exec could not
            // start one), and only to an instance without one either: a sessionless process
            // of that uid is not one of an instance that has a session.
            if let uid {
                for (key, tracked) in state.tracked where tracked.uid == uid && tracked.live {
                    if let id = key.instance { learnSession(id, &state) }
                }
                // A live instance of the app first; else one that just ended (its records may
                // arrive after its exit was handled). Two of either: the uid cannot tell.
                let mine = state.tracked.filter { $0.value.uid == uid && $0.value.session == nil }
                let live = mine.filter { $0.value.live }
                let recent = mine.filter {
                    $0.value.endedAt.map { -$0.timeIntervalSinceNow < 5 } ?? false
                }
                let candidates = live.isEmpty ? recent : live
                if candidates.count == 1, let (key, tracked) = candidates.first,
                    let id = key.instance
                {
                    if let domain { state.domains[domain] = id }
                    return (tracked.app, id)
                }
            }
            return nil
        }
    }

    /// The instance cgroup paths of a process (one per hierarchy; a leaf, `app` or `relay`,
    /// is left off), or nil once it is gone.
    static func cgroupPaths(of pid: Int32) -> [String]? {
        procText("/proc/\(pid)/cgroup", limit: 4096)?.split(separator: "\n").compactMap { line in
            // hierarchy-ID:controllers:path
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, parts[2].count > 1 else { return nil }
            return String(Cgroups.instancePath(of: parts[2]))
        }
    }

    // MARK: Recording

    /// Records one denial (rate limit and coalescing permitting) and publishes it. `instance`
    /// nil: a refusal of the app as such (a launch appd refused).
    @discardableResult
    func record(
        app: AppID, instance: String?, pid: Int32? = nil, source: APIDenial.Source, what: String,
        syscall: String? = nil, path: String? = nil, detail: String? = nil, count: Int = 1,
        now: Date = Date()
    ) -> APIDenial? {
        let count = max(1, count)
        let key: Subject = instance.map { .instance($0) } ?? .app(app)
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
                seq: state.next, time: now, app: app.spelling, instance: instance, pid: pid,
                source: source,
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
}
