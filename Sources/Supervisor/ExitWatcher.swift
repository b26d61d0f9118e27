import CLinux
import Dispatch
import Glibc

/// Learns that a launcher ended through its pidfd (readable once the process exits), never by
/// polling. One Dispatch read source per instance, all on one serial queue.
final class ExitWatcher: @unchecked Sendable {
    private let source: DispatchSourceRead
    let pidfd: Int32

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
        source.setCancelHandler { close(fd) }
        source.resume()
    }

    func cancel() { source.cancel() }
}
