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
            envp == nil
            ? posix_spawn(&pid, path, &actions, &attributes, argv, environ)
            : envp!.withUnsafeBufferPointer {
                posix_spawn(&pid, path, &actions, &attributes, argv, $0.baseAddress)
            }
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
        var kept: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = Self.now() + Double(timeoutSeconds)
        var timedOut = false
        var outputOpen = true
        var status: Int32 = 0
        var exited = false
        // Until it exits with its output read, or its timeout: a program that exits and leaves
        // a child holding the pipe ends the wait at the next quiet second.
        while !exited || outputOpen {
            let left = deadline - Self.now()
            if left <= 0 {
                timedOut = true
                break
            }
            var polled = [pollfd(fd: output[0], events: Int16(POLLIN), revents: 0)]
            if written < pending.count {
                polled.append(pollfd(fd: stdin[1], events: Int16(POLLOUT), revents: 0))
            }
            let ready = poll(&polled, nfds_t(polled.count), Int32(min(left, 1) * 1000) + 1)
            if ready < 0 && errno != EINTR { break }
            if polled.count == 2 && polled[1].revents != 0 {
                let count = pending[written...].withUnsafeBytes {
                    Glibc.write(stdin[1], $0.baseAddress, $0.count)
                }
                if count > 0 { written += count }
                if count < 0 && errno != EAGAIN && errno != EINTR { written = pending.count }
                if written >= pending.count { close(stdin[1]) }
            }
            if outputOpen && polled[0].revents != 0 {
                let count = read(output[0], &buffer, buffer.count)
                if count > 0 {
                    kept += buffer.prefix(max(0, min(count, outputLimit - kept.count)))
                } else if count == 0 || (errno != EINTR && errno != EAGAIN) {
                    outputOpen = false
                }
            }
            if !exited && (ready == 0 || !outputOpen) {
                exited = waitpid(pid, &status, WNOHANG) == pid
                if exited && ready == 0 { break }
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
