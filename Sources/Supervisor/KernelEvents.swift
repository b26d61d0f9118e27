import AppdBase
import CLinux
import Foundation
import Glibc
import Synchronization

/// One thread in `epoll_wait` for every kernel event the supervisor waits on: each instance's
/// launcher pidfd (readable when it ends), the memory-pressure (PSI) triggers of jetsam. With
/// 1,000 running instances the daemon does nothing until the kernel has something to say: no
/// loop visits the instances, no thread per instance.
///
/// A registration is one-shot for pidfds (`EPOLLONESHOT`: an exit happens once, and a level-
/// triggered fd that stays readable would otherwise wake the loop until it is closed) and
/// level-triggered for PSI triggers (the kernel rate-limits those to one per window). Handlers
/// run on the loop's thread: they must only hand the event on (a Task, a queue), never block.
final class KernelEvents: Sendable {
    typealias Handler = @Sendable (_ events: UInt32) -> Void

    struct Token: Hashable, Sendable {
        fileprivate let value: UInt64
    }

    private struct State {
        var next: UInt64 = 1
        var handlers: [UInt64: (fd: Int32, handler: Handler)] = [:]
    }

    private let epoll: Int32
    private let state = Mutex(State())

    init() throws {
        epoll = appd_epoll_create()
        guard epoll >= 0 else {
            throw AppdError.system("epoll_create1 for the supervisor's event loop")
        }
        // The thread holds the loop for the life of the process (one supervisor per daemon).
        let thread = Thread { [self] in run() }
        thread.name = "appd-kernel-events"
        thread.stackSize = 256 << 10
        thread.start()
    }

    static let readable = UInt32(APPD_EPOLLIN)
    static let priority = UInt32(APPD_EPOLLPRI)
    static let oneShot = UInt32(APPD_EPOLLONESHOT)

    /// Watches `fd` (still owned by the caller, who must `remove` before closing it) for
    /// `events`; `handler` gets the events the kernel reported.
    func add(_ fd: Int32, events: UInt32, handler: @escaping Handler) throws -> Token {
        let token = state.withLock { state -> UInt64 in
            let token = state.next
            state.next += 1
            state.handlers[token] = (fd, handler)
            return token
        }
        guard appd_epoll_add(epoll, fd, events, token) == 0 else {
            let error = AppdError.system("epoll_ctl(ADD) of fd \(fd)")
            _ = state.withLock { $0.handlers.removeValue(forKey: token) }
            throw error
        }
        return Token(value: token)
    }

    /// Stops watching `fd`; an event already taken from the kernel for it is dropped (tokens
    /// are never reused, so it cannot reach another registration).
    func remove(_ token: Token, fd: Int32) {
        state.withLock { state in
            guard state.handlers.removeValue(forKey: token.value) != nil else { return }
            _ = appd_epoll_remove(epoll, fd)
        }
    }

    /// How many registrations are live (tests, diagnostics).
    var count: Int { state.withLock { $0.handlers.count } }

    private func run() {
        var tokens = [UInt64](repeating: 0, count: 64)
        var reported = [UInt32](repeating: 0, count: 64)
        while true {
            let ready = appd_epoll_wait(epoll, &tokens, &reported, 64, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                // EBADF/EINVAL cannot happen on our own epoll fd; do not spin if they do.
                usleep(100_000)
                continue
            }
            for index in 0..<Int(ready) {
                let token = tokens[index]
                // One-shot registrations fire once; their handler stays until `remove`.
                guard let registration = state.withLock({ $0.handlers[token] }) else { continue }
                registration.handler(reported[index])
                if reported[index] & UInt32(APPD_EPOLLERR | APPD_EPOLLHUP) != 0 {
                    // An fd in error stays ready: watched on, it would wake the loop forever.
                    // Under the lock, and only if still registered: once its owner has removed
                    // it, the fd may be closed and its number another registration's.
                    state.withLock { state in
                        guard state.handlers.removeValue(forKey: token) != nil else { return }
                        _ = appd_epoll_remove(epoll, registration.fd)
                    }
                }
            }
        }
    }
}
