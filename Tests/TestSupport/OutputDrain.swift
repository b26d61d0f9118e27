import Foundation
import Glibc

/// Reads a child's output as it comes, on a thread of its own, until EOF, and closes the fd.
/// Reading it only after the child ended deadlocks under load: a child that fills its pipe or
/// socket blocks in write and hears nothing else (a Player test's app, blocked on its main
/// thread, heard neither the lifecycle messages nor SIGTERM and was SIGKILLed).
public final class OutputDrain: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    private var finished = false

    public init(fd: Int32, name: String) {
        let thread = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = read(fd, &buffer, buffer.count)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                lock.withLock { data.append(contentsOf: buffer[..<n]) }
            }
            close(fd)
            lock.withLock { finished = true }
        }
        thread.name = name
        thread.start()
    }

    public var isFinished: Bool { lock.withLock { finished } }
    public var bytes: Data { lock.withLock { data } }
    public var text: String { String(decoding: bytes, as: UTF8.self) }

    /// Waits until `condition` holds on what was read so far, the output ends, or `seconds`
    /// pass; returns whether `condition` held.
    @discardableResult
    public func wait(_ seconds: Double, until condition: (Data) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let (read, ended) = lock.withLock { (data, finished) }
            if condition(read) { return true }
            if ended || Date() >= deadline { return false }
            usleep(20_000)
        }
    }

    /// Waits until the output ends (at most `seconds`).
    public func waitForEnd(_ seconds: Double) { wait(seconds) { _ in false } }
}

/// `spawnPlaced` with the child's stdout on a stream socket that an `OutputDrain` reads as it
/// comes, and the `placed` fds besides; argv[0] is `executable`. A socket, not a pipe: its
/// buffer fills sooner (about 160 of the Player's lines), so a test whose reader falls behind
/// shows it.
public func spawnDrained(
    _ executable: String, arguments: [String], environment: [String],
    placing placed: [(child: Int32, parent: Int32)] = []
) throws -> (pid: pid_t, output: OutputDrain) {
    var fds: [Int32] = [-1, -1]
    let stream = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
    guard socketpair(AF_UNIX, stream, 0, &fds) == 0 else {
        throw SpawnFailure(executable: executable, errno: errno)
    }
    // The child's end is the child's alone once it runs, or nobody's if it could not start.
    defer { close(fds[1]) }
    let pid: pid_t
    do {
        pid = try spawnPlaced(
            executable, arguments: [executable] + arguments, environment: environment,
            placing: [(child: 1, parent: fds[1])] + placed)
    } catch {
        close(fds[0])
        throw error
    }
    return (pid, OutputDrain(fd: fds[0], name: URL(fileURLWithPath: executable).lastPathComponent))
}

/// A child a test runs beside what it tests (`appctl events`, `appctl denials -f`): its stdout
/// drained as it comes, stderr to /dev/null, no other fd of the test process. Stopped by its
/// pid (it is ours) with SIGKILL: the test runner's threads block SIGTERM, and a child inherits
/// the mask.
public final class DrainedChild {
    public let pid: pid_t
    public let output: OutputDrain
    private var reaped = false

    public init(_ executable: String, arguments: [String], environment: [String]) throws {
        let null = open("/dev/null", O_WRONLY | O_CLOEXEC)
        defer { close(null) }
        (pid, output) = try spawnDrained(
            executable, arguments: arguments, environment: environment,
            placing: [(child: 2, parent: null)])
    }

    /// Waits until what it printed so far satisfies `condition` (at most `seconds`), then
    /// stops it and waits for the end of its output. A condition that never holds only costs
    /// the wait: the test's checks then fail on what it did print.
    public func stop(waitingAtMost seconds: Double = 20, until condition: (Data) -> Bool) -> Data {
        output.wait(seconds, until: condition)
        stop()
        output.waitForEnd(5)
        return output.bytes
    }

    public func stop() {
        guard !reaped else { return }
        reaped = true
        kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }

    deinit { stop() }
}
