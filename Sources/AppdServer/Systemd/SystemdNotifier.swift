import CSystemd
import Dispatch
import Glibc
import Synchronization

/// systemd's service notifications through libsystemd: `sd_notify(3)` for READY, STATUS,
/// WATCHDOG, STOPPING and RELOADING, `sd_watchdog_enabled(3)` for the ping interval. Not under
/// systemd (no `$NOTIFY_SOCKET`) every call does nothing.
///
/// libsystemd sends on a blocking datagram socket, and a datagram socket blocks its sender
/// once the receiver's queue is full (`net.unix.max_dgram_qlen`, 10 by default); the watchdog
/// pings come from the event loop that answers the API. So messages go out in order from a
/// queue of their own, at most `maxPending` waiting: a busy systemd loses a message, it never
/// stalls appd.
///
/// `$NOTIFY_SOCKET` stays in appd's environment (libsystemd reads it there on every call); no
/// app inherits it, since the launcher is spawned with an empty environment.
public final class SystemdNotifier: Sendable {
    public let isActive: Bool
    /// Half of `$WATCHDOG_USEC` in microseconds (systemd's advice), when the watchdog is on and
    /// meant for this process (`$WATCHDOG_PID`).
    public let watchdogIntervalMicroseconds: Int64?
    private let queue = DispatchQueue(label: "appd.systemd.notify")
    private let pending = Mutex(0)
    static let maxPending = 32

    public init() {
        isActive = getenv("NOTIFY_SOCKET") != nil
        var usec: UInt64 = 0
        if isActive, sd_watchdog_enabled(0, &usec) > 0, usec > 0 {
            watchdogIntervalMicroseconds = Int64(usec / 2)
        } else {
            watchdogIntervalMicroseconds = nil
        }
    }

    /// READY=1 and a status line: systemd starts units ordered after appd, and the socket's
    /// queued clients are being answered. Also the end of a reload.
    public func ready(status: String) { send(["READY=1", "STATUS=\(status)"]) }
    public func status(_ status: String) { send(["STATUS=\(status)"]) }
    public func stopping(status: String) { send(["STOPPING=1", "STATUS=\(status)"]) }
    public func watchdog() { send(["WATCHDOG=1"]) }
    /// A reload begins (systemd.service(5), Type=notify-reload's protocol, which systemd 253+
    /// uses to order `systemctl reload`): READY=1 ends it.
    public func reloading(status: String) {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let microseconds =
            UInt64(clamping: now.tv_sec) * 1_000_000 + UInt64(clamping: now.tv_nsec / 1000)
        send(["RELOADING=1", "MONOTONIC_USEC=\(microseconds)", "STATUS=\(status)"])
    }

    /// Queues one message; false when nobody listens or `maxPending` are already waiting.
    @discardableResult
    public func send(_ lines: [String]) -> Bool {
        guard isActive else { return false }
        let queued = pending.withLock { count in
            guard count < Self.maxPending else { return false }
            count += 1
            return true
        }
        guard queued else { return false }
        let state = lines.joined(separator: "\n")
        queue.async { [self] in
            _ = sd_notify(0, state)
            pending.withLock { $0 -= 1 }
        }
        return true
    }

    /// Waits until what was queued went out (before the process exits).
    public func flush() { queue.sync {} }

    /// The listening sockets systemd passed (sd_listen_fds: `$LISTEN_PID` is appd,
    /// `$LISTEN_FDS` ≥ 1), the first at fd 3, made close-on-exec; the variables are removed so
    /// that nothing started later takes them as its own.
    public static func listeningSocket() -> Int32? {
        let count = sd_listen_fds(1)
        guard count >= 1 else { return nil }
        return SD_LISTEN_FDS_START
    }
}
