import AppdAPI
import Glibc
import Supervisor

/// The instances' output in the journal: one entry per line, tagged with the app, so that
/// `journalctl APPD_APP=com.example.hello` (or `journalctl -t com.example.hello`) shows what
/// it printed. Fields: `SYSLOG_IDENTIFIER` and `APPD_APP` (the bundle id), `APPD_INSTANCE`,
/// `APPD_PID` and `SYSLOG_PID` (the instance's launcher), `APPD_UID` (the app's uid); journald adds
/// `_SYSTEMD_UNIT=appd.service` itself. stdout and stderr share one log file, so both are
/// priority 6 (info).
///
/// Sends wait at most 20 ms for room in journald's queue (`net.unix.max_dgram_qlen`, 10 on a
/// host without systemd's sysctl defaults, 512 with them): when journald falls behind, the
/// lines not taken come again on the supervisor's next pass, so the journal lags rather than
/// loses them, and the supervisor never stalls for long.
public final class JournalOutputSink: InstanceOutputSink {
    let socketPath: String
    let fd: Int32

    public init?(socketPath: String = "/run/systemd/journal/socket") {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var timeout = timeval(tv_sec: 0, tv_usec: 20_000)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        self.fd = fd
        self.socketPath = socketPath
    }

    deinit { close(fd) }

    public func write(lines: [String], of instance: APIInstance) -> Int {
        let common = [
            ("PRIORITY", "6"), ("SYSLOG_IDENTIFIER", instance.app), ("APPD_APP", instance.app),
            ("APPD_INSTANCE", instance.id), ("APPD_UID", String(instance.uid)),
        ] + (instance.pid.map { [("APPD_PID", String($0)), ("SYSLOG_PID", String($0))] } ?? [])
        for (index, line) in lines.enumerated() {
            let sent = JournalLogHandler.send(JournalLogHandler.encode([("MESSAGE", line)] + common), fd: fd, to: socketPath)
            // Full (EAGAIN after the timeout): the rest next pass. No journald at all
            // (ECONNREFUSED, ENOENT): the log file has it, the journal cannot.
            if sent < 0 { return errno == EAGAIN || errno == EINTR ? index : lines.count }
        }
        return lines.count
    }
}
