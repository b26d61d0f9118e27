import Foundation
import Glibc

/// A program a test runs, spawned so that it gets fds 0-2 and nothing else of the test process,
/// with its output on close-on-exec sockets that no other child can inherit. The tests' one way
/// to start a process (scripts/test's lint refuses Foundation's `Process` in Tests/).
///
/// Why not Foundation's `Process`: on Linux it closes in the child only the fds it saw open
/// before spawning, and its pipes lack close-on-exec. A pipe another test's thread opens
/// meanwhile leaks into the child, and that test waits for its EOF until the child exits. CI saw
/// it: `appctl ps` of the flood test took 9.05 s, exactly as long as the instance attacker that
/// InstanceLimitTests spawned at the same moment lived.
public final class ChildProcess: @unchecked Sendable {
    /// Where the child's stdout or stderr goes.
    public enum Output {
        /// The test process's own.
        case inherit
        /// /dev/null.
        case discard
        /// A stream the test reads (`output`, `errors`, `finish()`).
        case capture
        /// Appended to a file.
        case append(String)
        /// stderr only: wherever stdout goes.
        case stdout
    }

    public let processIdentifier: pid_t
    /// The read end of the stdout stream, when stdout is `.capture`.
    public let output: FileHandle?
    /// The read end of the stderr stream, when stderr is `.capture`.
    public let errors: FileHandle?
    private let lock = NSLock()
    private var status: Int32?

    /// Spawns `executable` (a built tool's name or an absolute path) with `arguments`.
    /// `environment` replaces the test process's own when given; `directory` is its working
    /// directory; `input` names a file for its stdin (the test's own stdin otherwise).
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        directory: String? = nil, input: String? = nil, stdout: Output = .capture,
        stderr: Output = .stdout
    ) throws {
        let path = executable.hasPrefix("/") ? executable : builtExecutable(executable)
        var opened: [Int32] = []
        defer { for fd in opened { close(fd) } }
        func open(_ file: String, _ flags: Int32) throws -> Int32 {
            let fd = Glibc.open(file, flags | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw SpawnFailure(executable: file, errno: errno) }
            opened.append(fd)
            return fd
        }
        var readEnds: [Int32] = []
        func streamEnd() throws -> Int32 {
            // A socket pair, not a pipe: Glibc's module has no pipe2, and a pipe made
            // close-on-exec only after pipe() could leak to a child spawned in between.
            var fds: [Int32] = [-1, -1]
            let stream = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
            guard socketpair(AF_UNIX, stream, 0, &fds) == 0 else {
                for fd in readEnds { close(fd) }
                throw SpawnFailure(executable: path, errno: errno)
            }
            _ = shutdown(fds[0], Int32(SHUT_WR))
            _ = shutdown(fds[1], Int32(SHUT_RD))
            readEnds.append(fds[0])
            opened.append(fds[1])
            return fds[1]
        }
        var placed: [(child: Int32, parent: Int32)] = []
        if let input { placed.append((0, try open(input, O_RDONLY))) }
        var captured: [Int32?] = [nil, nil]
        for (index, output) in [stdout, stderr].enumerated() {
            let child = Int32(index + 1)
            switch output {
            case .inherit: break
            case .discard: placed.append((child, try open("/dev/null", O_WRONLY)))
            case .append(let file): placed.append((child, try open(file, O_WRONLY | O_APPEND)))
            case .capture:
                placed.append((child, try streamEnd()))
                captured[index] = readEnds.last
            case .stdout:
                if let toStdout = placed.first(where: { $0.child == 1 }) {
                    placed.append((child, toStdout.parent))
                } else {
                    placed.append((child, 1))
                }
            }
        }
        let environment = environment ?? ProcessInfo.processInfo.environment
        let command = directory.map { ["/usr/bin/env", "-C", $0, path] } ?? [path]
        do {
            processIdentifier = try spawnPlaced(
                command[0], arguments: command + arguments,
                environment: environment.map { "\($0.key)=\($0.value)" }, placing: placed)
        } catch {
            for fd in readEnds { close(fd) }
            throw error
        }
        output = captured[0].map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
        errors = captured[1].map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
    }

    /// Whether it has not exited yet (it is reaped when it has).
    public var isRunning: Bool { reap(blocking: false) == nil }

    public func waitUntilExit() { _ = reap(blocking: true) }

    /// Its exit code, or the signal that ended it; after it exited.
    public var terminationStatus: Int32 {
        let status = reap(blocking: true) ?? 0
        return signaled ? status & 0x7f : (status >> 8) & 0xff
    }

    /// Whether a signal ended it (the wait status's low 7 bits, neither 0 nor 0x7f: WIFSIGNALED);
    /// after it exited.
    public var signaled: Bool {
        let signal = (reap(blocking: true) ?? 0) & 0x7f
        return signal != 0 && signal != 0x7f
    }

    /// Sends it `signal` unless it was reaped already (its pid may be another's then).
    public func signal(_ signal: Int32) {
        lock.withLock { if status == nil { _ = kill(processIdentifier, signal) } }
    }

    /// Reads the captured output to its end and waits for the exit: (code, stdout, stderr).
    /// Both streams are read as they fill, so a child that fills one is never stuck.
    @discardableResult
    public func finish() -> (code: Int32, stdout: String, stderr: String) {
        var open = [output, errors].map { $0?.fileDescriptor ?? -1 }
        var read: [[UInt8]] = [[], []]
        var buffer = [UInt8](repeating: 0, count: 65536)
        while open.contains(where: { $0 >= 0 }) {
            var polled = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard poll(&polled, nfds_t(polled.count), -1) >= 0 || errno == EINTR else { break }
            for index in open.indices where open[index] >= 0 && polled[index].revents != 0 {
                let count = Glibc.read(open[index], &buffer, buffer.count)
                if count > 0 {
                    read[index] += buffer[..<count]
                } else if count == 0 || errno != EINTR {
                    open[index] = -1
                }
            }
        }
        return (
            terminationStatus, String(decoding: read[0], as: UTF8.self),
            String(decoding: read[1], as: UTF8.self)
        )
    }

    /// The exit status once it exited (reaped then): a blocking wait leaves it unreaped
    /// (WNOWAIT) until it holds the lock, so `signal` never waits for the exit nor hits a pid
    /// already reaped.
    private func reap(blocking: Bool) -> Int32? {
        if blocking {
            var info = siginfo_t()
            while waitid(P_PID, id_t(processIdentifier), &info, WEXITED | WNOWAIT) < 0,
                errno == EINTR
            {}
        }
        return lock.withLock {
            if let status { return status }
            var raw: Int32 = 0
            var result: pid_t
            repeat {
                result = waitpid(processIdentifier, &raw, WNOHANG)
            } while result < 0 && errno == EINTR
            if result == processIdentifier { status = raw }
            return status
        }
    }

    /// A child the test let go of while it runs is killed, not left behind.
    deinit {
        signal(SIGKILL)
        _ = reap(blocking: true)
    }
}
