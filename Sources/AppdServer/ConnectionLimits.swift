import AppContainers
import AppdBase
import AppdConfig
import Foundation
import Glibc
import Synchronization

/// The `[API]` caps on connections (docs/api.md, "Limits"): every connection holds an fd, and
/// a user who may connect must not be able to hold them all. Per uid: at most
/// `MaxConnectionsPerUser` connections and `MaxStreamsPerUser` long-lived requests (event
/// streams, followed logs, `wait`), answered 429 past that. In all: `MaxConnections`, of which
/// the last `ReservedConnections` only the admin group (`AdminAllowed`) and root may use, so
/// they are served when other users hold the rest; others get 503 there. root is never
/// refused: no cap applies to it (its connections count against the others), so no user, and
/// no admin, can lock it out.
///
/// Admission happens as a connection is accepted, on the event loop (HTTPServer.bind). A
/// refused connection is still answered (it must learn why) by a `RefusalHandler`, there too,
/// but only `maxRefusing` at a time, each given `refusalTimeout` to send its request; past that
/// a connection is closed unanswered. So the daemon's fds stay under
/// `MaxConnections + maxRefusing` for connections, whatever a client does, and refusals never
/// occupy the tasks that serve requests. Deciding who is privileged reads the user database
/// (Authorizer) only once the reserve is reached, and then at most once per uid and gid every
/// 5 s.
final class ConnectionLimits: Sendable {
    static let maxRefusing = 64
    static let refusalTimeout: Int64 = 2

    let settings: APISettings
    private let privileged: @Sendable (Caller) -> Bool

    private struct State {
        var total = 0
        var perUser: [uid_t: Int] = [:]
        var streams: [uid_t: Int] = [:]
        var refusing = 0
        /// Who is privileged, remembered for a few seconds: the user database is read at most
        /// once per uid in that time, not on every connection of a flood.
        var privilegedCache: [UInt64: (Bool, UInt64)] = [:]
    }

    private let state = Mutex(State())

    init(settings: APISettings, privileged: @escaping @Sendable (Caller) -> Bool) {
        self.settings = settings
        self.privileged = privileged
    }

    enum Admission {
        /// Served; `release` when the connection closes.
        case admitted
        /// To be answered with this failure, then closed; `refused()` when done.
        case refused(AppdError)
        /// Closed at once, unanswered (too many refusals already being answered).
        case dropped
    }

    func admit(_ caller: Caller) -> Admission {
        // Who is an admin matters only once the reserve is reached: the user database is not
        // read (on the event loop) for connections that would be admitted anyway.
        let reserveReached = state.withLock {
            $0.total >= settings.maxConnections - settings.reservedConnections
        }
        let isPrivileged = caller.uid == 0 || (reserveReached && isPrivileged(caller))
        return state.withLock { state in
            let own = state.perUser[caller.uid, default: 0]
            var failure: AppdError?
            let isRoot = caller.uid == 0
            if isRoot {
                // root is never refused (its connections still count against the others).
            } else if state.total >= settings.maxConnections {
                failure = AppdError(
                    .unavailable,
                    "appd holds \(state.total) connections, its limit ([API] MaxConnections=\(settings.maxConnections))",
                    hint:
                        "try again shortly; an admin can raise MaxConnections (and LimitNOFILE= in appd.service)"
                )
            } else if !isPrivileged
                && state.total >= settings.maxConnections - settings.reservedConnections
            {
                failure = AppdError(
                    .unavailable,
                    "appd holds \(state.total) connections; the remaining \(settings.reservedConnections) are reserved for the admin group ([API] ReservedConnections)",
                    hint: "try again shortly")
            } else if own >= settings.maxConnectionsPerUser {
                failure = AppdError(
                    .tooManyRequests,
                    "uid \(caller.uid) holds \(own) connections, the most one user may ([API] MaxConnectionsPerUser=\(settings.maxConnectionsPerUser))",
                    hint: "close some (event streams, followed logs) and try again")
            }
            guard let failure else {
                state.total += 1
                state.perUser[caller.uid] = own + 1
                return .admitted
            }
            guard state.refusing < Self.maxRefusing else { return .dropped }
            state.refusing += 1
            return .refused(failure)
        }
    }

    func release(_ caller: Caller) {
        state.withLock { state in
            state.total -= 1
            let own = state.perUser[caller.uid, default: 1] - 1
            state.perUser[caller.uid] = own > 0 ? own : nil
        }
    }

    func refused() { state.withLock { $0.refusing -= 1 } }

    /// A slot for one long-lived request, held until the returned value goes away (the reply
    /// that streams owns it, so it is given back however the stream ends).
    func openStream(_ caller: Caller) throws -> StreamSlot {
        let count = state.withLock { state -> Int? in
            let own = state.streams[caller.uid, default: 0]
            guard caller.uid == 0 || own < settings.maxStreamsPerUser else { return own }
            state.streams[caller.uid] = own + 1
            return nil
        }
        if let count {
            throw AppdError(
                .tooManyRequests,
                "uid \(caller.uid) holds \(count) event streams, followed logs or waits, the most one user may ([API] MaxStreamsPerUser=\(settings.maxStreamsPerUser))",
                hint:
                    "close one of them (appctl events, appctl logs --follow, launch --wait) and try again"
            )
        }
        return StreamSlot { [weak self] in
            self?.state.withLock { state in
                let own = state.streams[caller.uid, default: 1] - 1
                state.streams[caller.uid] = own > 0 ? own : nil
            }
        }
    }

    /// What is held now (tests, doctor).
    var counts: (connections: Int, refusing: Int) { state.withLock { ($0.total, $0.refusing) } }

    private func isPrivileged(_ caller: Caller) -> Bool {
        if caller.uid == 0 { return true }
        let now = DispatchTime.now().uptimeNanoseconds
        // Rights follow the user and its primary group (Authorizer.Identity).
        let key = UInt64(caller.uid) << 32 | UInt64(caller.gid)
        if let (known, at) = state.withLock({ $0.privilegedCache[key] }), now &- at < 5_000_000_000
        {
            return known
        }
        let known = privileged(caller)
        state.withLock { state in
            if state.privilegedCache.count > 4096 { state.privilegedCache.removeAll() }
            state.privilegedCache[key] = (known, now)
        }
        return known
    }
}

/// One long-lived request's place in `MaxStreamsPerUser`, given back once, when released or
/// when it goes away.
final class StreamSlot: Sendable {
    private let release: Mutex<(@Sendable () -> Void)?>

    init(_ release: @escaping @Sendable () -> Void) { self.release = Mutex(release) }

    func close() {
        let action = release.withLock { value in
            defer { value = nil }
            return value
        }
        action?()
    }

    deinit { close() }
}
