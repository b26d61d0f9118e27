import AppdBase
import CLinux
import Glibc

/// A program appd-oci runs on the host and waits for: systemd's busctl (SystemdScope), a
/// config's hooks (OCIHooks). Bounded in time and in what it reads: `input` is written to its
/// stdin (then closed), its stdout and stderr together are read up to `outputLimit` bytes (the
/// rest is read and dropped, so it never blocks on a full pipe), and past `timeout` it is
/// killed. Its exit is waited for; nothing of it outlives the call but what it detached itself.
struct HostCommand {
    var path: String
    /// argv, argv[0] included.
    var arguments: [String]
    /// nil: appd-oci's own.
    var environment: [String]? = nil
    var input: [UInt8] = []
    /// An fd of the program to run, opened and checked by the caller (OCIHooks): executed
    /// through it (`/proc/self/fd/3` in the child, as glibc's fexecve does), never by `path`,
    /// which is then only for messages.
    var executable: Int32? = nil
    var timeoutSeconds = 10
    var outputLimit = 4096

    struct Result {
        /// waitpid's status (0: it exited with 0).
        var status: Int32
        var output: String
        var timedOut: Bool

        /// "exit status 3", "killed by signal 9", "killed after its timeout of 5 s".
        func describe(timeout: Int) -> String {
            if timedOut { return "killed after its timeout of \(timeout) s" }
            if status & 0x7F == 0 { return "exit status \((status >> 8) & 0xFF)" }
            return "killed by signal \(status & 0x7F)"
        }
    }

    func run() throws -> Result {
        // A program gone before it read its input must not end appd-oci with SIGPIPE (its main
        // ignores it already; so does any caller of this).
        signal(SIGPIPE, SIG_IGN)
        var stdin: [Int32] = [-1, -1]
        var output: [Int32] = [-1, -1]
        guard appd_pipe_cloexec(&stdin) == 0 else { throw AppdError.system("pipe") }
        guard appd_pipe_cloexec(&output) == 0 else {
            close(stdin[0])
            close(stdin[1])
            throw AppdError.system("pipe")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdin[0], 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        posix_spawn_file_actions_adddup2(&actions, output[1], 2)
        if let executable { posix_spawn_file_actions_adddup2(&actions, executable, 3) }
        let program = executable == nil ? path : "/proc/self/fd/3"
        // appd-oci ignores SIGPIPE; the program gets the default.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF))
        let argv = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let envp = environment.map { $0.map { strdup($0) } + [nil] }
        defer { for pointer in envp ?? [] { free(pointer) } }
        var pid: pid_t = 0
        let spawned =
            envp.map { list in
                list.withUnsafeBufferPointer {
                    posix_spawn(&pid, program, &actions, &attributes, argv, $0.baseAddress)
                }
            } ?? posix_spawn(&pid, program, &actions, &attributes, argv, environ)
        close(stdin[0])
        close(output[1])
        defer { close(output[0]) }
        guard spawned == 0 else {
            close(stdin[1])
            throw AppdError(.unsupported, "cannot run \(path): \(errnoText(spawned))")
        }
        let pending = input
        var written = 0
        if pending.isEmpty { close(stdin[1]) }
        _ = fcntl(stdin[1], F_SETFL, O_NONBLOCK)
        // Its exit, seen at once (Linux 5.3); without a pidfd, looked for every 10 ms.
        let exitFD = appd_pidfd_open(pid, 0)
        defer { if exitFD >= 0 { close(exitFD) } }
        var kept: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = Self.now() + Double(timeoutSeconds)
        var timedOut = false
        var outputOpen = true
        var status: Int32 = 0
        var exited = false
        // Until it has exited and its output is read to the end or has been quiet for a moment
        // (a program that exits and leaves a child holding the pipe), or its timeout.
        var quietAfterExit = 0
        while !exited || (outputOpen && quietAfterExit < 2) {
            let left = deadline - Self.now()
            if left <= 0 {
                timedOut = true
                break
            }
            // A negative fd is left out by poll(2).
            var polled = [
                pollfd(fd: outputOpen ? output[0] : -1, events: Int16(POLLIN), revents: 0),
                pollfd(
                    fd: written < pending.count ? stdin[1] : -1, events: Int16(POLLOUT),
                    revents: 0),
                pollfd(fd: exited ? -1 : exitFD, events: Int16(POLLIN), revents: 0),
            ]
            let slice = exitFD >= 0 && !exited ? min(left, 1) : min(left, 0.01)
            let ready = poll(&polled, 3, Int32(slice * 1000) + 1)
            if ready < 0 && errno != EINTR { break }
            if polled[1].revents != 0 {
                let count = pending[written...].withUnsafeBytes {
                    Glibc.write(stdin[1], $0.baseAddress, $0.count)
                }
                if count > 0 { written += count }
                if count < 0 && errno != EAGAIN && errno != EINTR { written = pending.count }
                if written >= pending.count { close(stdin[1]) }
            }
            if polled[0].revents != 0 {
                let count = read(output[0], &buffer, buffer.count)
                if count > 0 {
                    kept += buffer.prefix(max(0, min(count, outputLimit - kept.count)))
                } else if count == 0 || (errno != EINTR && errno != EAGAIN) {
                    outputOpen = false
                }
            }
            if exited {
                quietAfterExit = ready == 0 ? quietAfterExit + 1 : 0
            } else if polled[2].revents != 0 || exitFD < 0 {
                exited = waitpid(pid, &status, WNOHANG) == pid
            }
        }
        if written < pending.count { close(stdin[1]) }
        if !exited {
            if timedOut { Glibc.kill(pid, SIGKILL) }
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
        return Result(
            status: timedOut ? -1 : status, output: String(decoding: kept, as: UTF8.self),
            timedOut: timedOut)
    }

    private static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
