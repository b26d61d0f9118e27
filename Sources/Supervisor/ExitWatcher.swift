import CLinux
import Dispatch
import Foundation
import Glibc
import Synchronization

/// Learns that a launcher ended through its pidfd (readable once the process exits), registered
/// one-shot with the supervisor's single epoll thread (KernelEvents): nothing runs for a live
/// instance. `onExit` runs on `queue`, once. `hasExited` lets the Supervisor's slow sweep look at
/// the same pidfd as a safety net.
final class ExitWatcher: Sendable {
    let pidfd: Int32
    private let events: KernelEvents
    /// Set once the event was taken from the kernel (or the watch cancelled): the exit is being
    /// handled, or nobody wants it any more.
    private let fired: Fired
    private let token: KernelEvents.Token?

    private final class Fired: Sendable {
        let flag = Atomic<Bool>(false)
        /// True for the first caller only.
        func take() -> Bool { !flag.exchange(true, ordering: .acquiringAndReleasing) }
        var isSet: Bool { flag.load(ordering: .acquiring) }
    }

    /// nil when the process is already gone (pidfd_open fails with ESRCH).
    init?(
        pid: pid_t, events: KernelEvents, queue: DispatchQueue,
        onExit: @escaping @Sendable () -> Void
    ) {
        let fd = appd_pidfd_open(pid, 0)
        guard fd >= 0 else { return nil }
        pidfd = fd
        self.events = events
        // The handler holds the flag, not the watcher: dropping the watcher unregisters it.
        let fired = Fired()
        self.fired = fired
        // A registration that fails (ENOMEM) leaves the exit to the sweep, which still sees it.
        token = try? events.add(fd, events: KernelEvents.readable | KernelEvents.oneShot) { _ in
            if fired.take() { queue.async(execute: onExit) }
        }
    }

    /// Whether the process has ended (its pidfd is readable) and the event loop has not
    /// reported it, asked without waiting.
    var hasExited: Bool { !fired.isSet && appd_pidfd_exited(pidfd) == 1 }

    func cancel() { _ = fired.take() }

    deinit {
        if let token { events.remove(token, fd: pidfd) }
        close(pidfd)
    }
}
