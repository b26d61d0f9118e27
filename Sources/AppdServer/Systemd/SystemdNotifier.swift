import Foundation
import Glibc

/// systemd's service notification protocol (sd_notify(3)), spoken directly: one datagram of
/// `KEY=VALUE` lines to the unix socket named by `$NOTIFY_SOCKET` (a path, or `@name` for the
/// abstract namespace). That is all libsystemd's sd_notify does for these messages; doing it
/// here keeps libsystemd out of the daemon's link line and out of hosts without systemd. Not
/// under systemd (no `$NOTIFY_SOCKET`) every call does nothing.
public final class SystemdNotifier: Sendable {
    /// The socket's address, or nil when nobody listens.
    let address: String?
    /// Half of `$WATCHDOG_USEC` in microseconds (systemd's advice), when the watchdog is on and
    /// meant for us.
    public let watchdogIntervalMicroseconds: Int64?

    /// Reads `$NOTIFY_SOCKET` and `$WATCHDOG_USEC`/`$WATCHDOG_PID` from `environment`; with
    /// `unsetEnvironment`, removes them from the process so that no child (launcher, app)
    /// inherits them and talks to systemd on appd's behalf.
    public init(environment: [String: String], pid: pid_t = getpid(), unsetEnvironment: Bool = false) {
        let socket = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        address = socket
        if socket != nil, let usec = environment["WATCHDOG_USEC"].flatMap(UInt64.init), usec > 0,
            environment["WATCHDOG_PID"].flatMap(Int32.init).map({ $0 == pid }) ?? true
        {
            watchdogIntervalMicroseconds = Int64(usec / 2)
        } else {
            watchdogIntervalMicroseconds = nil
        }
        if unsetEnvironment {
            for name in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] { unsetenv(name) }
        }
    }

    public var isActive: Bool { address != nil }

    /// READY=1 and a status line: systemd starts units ordered after appd, and the socket's
    /// queued clients are being answered.
    public func ready(status: String) { send(["READY=1", "STATUS=\(status)"]) }
    public func status(_ status: String) { send(["STATUS=\(status)"]) }
    public func stopping(status: String) { send(["STOPPING=1", "STATUS=\(status)"]) }
    public func watchdog() { send(["WATCHDOG=1"]) }

    /// Sends one datagram; returns whether it went out. Failures are not errors for the daemon
    /// (systemd may be restarting), so they are only reported to the caller.
    @discardableResult
    public func send(_ lines: [String]) -> Bool {
        guard let address else { return false }
        // Non-blocking: a datagram socket blocks the sender once the receiver's queue is full
        // (net.unix.max_dgram_qlen, 10 by default), and the watchdog pings come from the event
        // loop that answers the API. A busy systemd loses a ping, never stalls appd.
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        guard var (socketAddress, length) = Self.unixAddress(address) else { return false }
        let message = Array(lines.joined(separator: "\n").utf8)
        let sent = withUnsafePointer(to: &socketAddress) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                message.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), generic, length) }
            }
        }
        return sent == message.count
    }

    /// A `sockaddr_un` for a path, or for an abstract name written `@name` (its first byte 0).
    static func unixAddress(_ address: String) -> (sockaddr_un, socklen_t)? {
        var bytes = Array(address.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
        var result = sockaddr_un()
        result.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: result.sun_path)
        // A path needs its terminating NUL; an abstract name is exactly its bytes.
        guard !bytes.isEmpty, bytes.count < capacity else { return nil }
        withUnsafeMutableBytes(of: &result.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path) ?? 2
        let terminator = bytes[0] == 0 ? 0 : 1
        return (result, socklen_t(pathOffset + bytes.count + terminator))
    }
}
