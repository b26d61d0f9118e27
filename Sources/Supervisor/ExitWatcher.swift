import CLinux
import Dispatch
import Foundation
import Glibc

/// Learns that a launcher ended through its pidfd (readable once the process exits). One
/// Dispatch read source per instance, all on one serial queue; `hasExited` lets the
/// Supervisor's log loop look at the same pidfd as a safety net (twice, in full test runs on a
/// loaded machine, an exit went unhandled for 20 s: its cgroup was left behind, empty).
final class ExitWatcher: @unchecked Sendable {
    private let source: DispatchSourceRead
    let pidfd: Int32
    private let lock = NSLock()
    private var closed = false

    /// nil when the process is already gone (pidfd_open fails with ESRCH).
    init?(pid: pid_t, queue: DispatchQueue, onExit: @escaping @Sendable () -> Void) {
        let fd = appd_pidfd_open(pid, 0)
        guard fd >= 0 else { return nil }
        pidfd = fd
        source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        source.setEventHandler { [source] in
            source.cancel()
            onExit()
        }
        source.setCancelHandler { [lock] in
            lock.lock()
            defer { lock.unlock() }
            close(fd)
        }
        source.resume()
    }

    /// Whether the process has ended (its pidfd is readable), asked without waiting. After the
    /// source fired, its exit is being handled: false.
    var hasExited: Bool {
        lock.lock()
        defer { lock.unlock() }
        guard !source.isCancelled else { return false }
        return appd_pidfd_exited(pidfd) == 1
    }

    func cancel() { source.cancel() }
}
