import CLinux
import Glibc
import LauncherProtocol

/// Signals and exit statuses. The outer launcher and PID 1 keep the forwarded signals and
/// SIGCHLD blocked and take them with sigwaitinfo, so there are no handlers and no races
/// between a signal and the wait.
enum Signals {
    /// The set the supervising loop waits on: the forwarded signals (SIGTERM, SIGINT, SIGHUP,
    /// SIGUSR1, SIGUSR2) and SIGCHLD. Added one by one: an array of them would be a runtime
    /// metadata lookup on every launch.
    static var supervised: sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGHUP)
        sigaddset(&set, SIGUSR1)
        sigaddset(&set, SIGUSR2)
        sigaddset(&set, SIGCHLD)
        return set
    }

    /// In the outer launcher, before anything else: SIGCHLD must not be ignored (an inherited
    /// SIG_IGN would make the kernel reap our children for us), and a closed status fd must
    /// give EPIPE rather than kill us.
    static func prepareLauncher() throws {
        signal(SIGCHLD, SIG_DFL)
        signal(SIGPIPE, SIG_IGN)
        var set = supervised
        try sys(sigprocmask(SIG_BLOCK, &set, nil), "signals", "cannot block signals")
    }

    /// In the app process, before exec: default dispositions and an empty mask, whatever the
    /// launcher (or whoever started it) had set.
    static func resetForApp() throws {
        for signo in 1..<Int32(65) where signo != SIGKILL && signo != SIGSTOP {
            signal(signo, SIG_DFL)  // 32 and 33 belong to glibc and fail: harmless
        }
        var empty = sigset_t()
        sigemptyset(&empty)
        try sys(sigprocmask(SIG_SETMASK, &empty, nil), "signals", "cannot unblock signals")
    }

    /// Forwards the supervised signals to `child` and reaps every child that exits, until
    /// `child` itself exits. PID 1 reaps orphans this way too.
    /// With `onlyHandled`, a signal the child has no handler for is dropped: the kernel's rule
    /// for a pid namespace's init, which the app is under an OCI engine.
    static func supervise(_ child: pid_t, onlyHandled: Bool = false) -> ExitStatus {
        var set = supervised
        var info = siginfo_t()
        while true {
            if let status = reap(child) { return status }
            let signo = sigwaitinfo(&set, &info)
            guard signo > 0 && signo != SIGCHLD else { continue }
            if onlyHandled && !handles(child, signo) { continue }
            kill(child, signo)
        }
    }

    /// Whether `pid` has a handler for `signo`: bit signo-1 of `SigCgt` in /proc/PID/status.
    static func handles(_ pid: pid_t, _ signo: Int32) -> Bool {
        let fd = open("/proc/\(pid)/status", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return true }
        defer { close(fd) }
        guard let bytes = try? FileIO.readAll(fd, limit: 1 << 16, step: "status") else {
            return true
        }
        let key = Array("SigCgt:".utf8)
        var index = 0
        while index + key.count <= bytes.count {
            if bytes[index..<(index + key.count)].elementsEqual(key) {
                var mask: UInt64 = 0
                var position = index + key.count
                while position < bytes.count && (bytes[position] == 9 || bytes[position] == 32) {
                    position += 1
                }
                while position < bytes.count, let digit = hexValue(bytes[position]) {
                    mask = mask << 4 | UInt64(digit)
                    position += 1
                }
                return signo >= 1 && signo <= 64 && mask & (1 << UInt64(signo - 1)) != 0
            }
            index += 1
        }
        return true
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        default: nil
        }
    }

    private static func reap(_ child: pid_t) -> ExitStatus? {
        while true {
            var status: Int32 = 0
            let pid = waitpid(-1, &status, WNOHANG)
            if pid == child { return ExitStatus(waitStatus: status) }
            if pid == 0 { return nil }
            if pid < 0 {
                if errno == EINTR { continue }
                // ECHILD: the child is gone without us seeing its status.
                return .exited(127)
            }
        }
    }
}

/// How the app ended, as the status fd and the launcher's own exit code report it.
enum ExitStatus: Equatable {
    case exited(Int32)
    case signaled(Int32)

    init(waitStatus status: Int32) {
        // WIFEXITED/WTERMSIG are macros Swift does not import.
        let signal = status & 0x7F
        self = signal == 0 ? .exited((status >> 8) & 0xFF) : .signaled(signal)
    }

    /// The status line (LauncherProtocol's `LauncherStatus`).
    var line: String {
        switch self {
        case .exited(let code): LauncherStatus.exited(code).line
        case .signaled(let signo): LauncherStatus.signaled(signo).line
        }
    }

    var launcherCode: Int32 {
        switch self {
        case .exited(let code): code
        case .signaled(let signo): 128 + signo
        }
    }

    /// Parses a `line` back (PID 1 sends it to the outer launcher).
    init?(line: String) {
        switch LauncherStatus(line: line) {
        case .exited(let code)?: self = .exited(code)
        case .signaled(let signo)?: self = .signaled(signo)
        case .failed?, nil: return nil
        }
    }
}
