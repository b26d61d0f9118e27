import AppdBase
import CLinux
import Foundation
import Glibc
import Synchronization

/// What `posix_spawn` of a launcher is asked: the fds it hands over and where they go, stdin,
/// the session, the arguments. Nothing else of the caller's fds reaches the child
/// (`closefrom`): SwiftNIO opens its epoll, listening and accepted sockets without
/// close-on-exec, and a launcher holding a client's connection keeps it open after the daemon
/// closed it (an idle timeout that does not close, a client that never sees EOF).
public struct SpawnPlan: Sendable {
    public var path: String
    /// argv, argv[0] first. The environment is empty.
    public var arguments: [String]
    /// The fds handed over, each placed at its `placements` target.
    public var sources: [Int32] = []
    public var placements: [Placement] = []
    /// fd 0 is /dev/null (else the caller's 0, or a placed one).
    public var stdinFromDevNull = false
    /// A session of its own (setsid), so a terminal's Ctrl-C for the daemon never reaches it.
    public var newSession: Bool
    /// Every fd from here up is closed in the child.
    public var closeFrom: Int32 = 3
    /// The source that is the cgroup v2 directory the child is born in (`bear(inCgroup:)`).
    public var cgroupSource: Int?

    public struct Placement: Sendable {
        public var source: Int
        public var target: Int32
    }

    public init(path: String, arguments: [String], newSession: Bool) {
        self.path = path
        self.arguments = arguments
        self.newSession = newSession
    }

    /// `fd` goes to `target` in the child (the same fd may go to several).
    public mutating func place(_ fd: Int32, at target: Int32) {
        let index =
            sources.firstIndex(of: fd)
            ?? {
                sources.append(fd)
                return sources.count - 1
            }()
        placements.append(Placement(source: index, target: target))
    }

    /// The child is born in the cgroup v2 directory `fd` (open, read-only), not moved there:
    /// `run` returns with it inside either way.
    public mutating func bear(inCgroup fd: Int32) {
        sources.append(fd)
        cgroupSource = sources.count - 1
    }

    /// Copies of `fds` above every target (close-on-exec; the caller closes them): fds at
    /// the lowest numbers, as a spawner thread receives them or a short-lived caller such as
    /// appd-oci has them, could be overwritten by one dup2 before they are placed.
    public func movedAboveTargets(_ fds: [Int32]) throws -> [Int32] {
        let floor = max(closeFrom, 3) + 16
        var moved: [Int32] = []
        for fd in fds {
            let high = fcntl(fd, F_DUPFD_CLOEXEC, floor)
            guard high >= 0 else {
                for fd in moved { close(fd) }
                throw AppdError.system("move a launcher fd up")
            }
            moved.append(high)
        }
        return moved
    }

    /// posix_spawn with `fds` standing for `sources` (the same fds, or a spawner's copies):
    /// every source must be above every target, as the caller's own fds are, or a dup2 could
    /// overwrite a source before it is placed.
    public func run(with fds: [Int32]) throws -> pid_t {
        guard let cgroupSource else { return try posixSpawn(with: fds) }
        let cgroup = fds[cgroupSource]
        switch spawnInCgroup(cgroup, with: fds) {
        case .success(let pid): return pid
        // No clone3 code for this architecture, or a kernel before CLONE_INTO_CGROUP (5.7):
        // spawned as before, then moved.
        case .failure(let error) where error.rawValue == ENOSYS || error.rawValue == EINVAL:
            let pid = try posixSpawn(with: fds)
            let line = Array("\(pid)\n".utf8)
            let procs = openat(cgroup, "cgroup.procs", O_WRONLY | O_CLOEXEC)
            let written =
                procs >= 0
                && line.withUnsafeBytes { write(procs, $0.baseAddress, $0.count) } == line.count
            let failure = errno
            if procs >= 0 { close(procs) }
            guard written else {
                // Never a launcher outside its cgroup: it would build the sandbox unlimited.
                _ = Glibc.kill(pid, SIGKILL)
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                throw AppdError.system("move \(path) into its cgroup", errno: failure)
            }
            return pid
        case .failure(let error):
            throw AppdError.system("start \(path) in its cgroup", errno: error.rawValue)
        }
    }

    /// appd_spawn_in_cgroup: what `posixSpawn` does, with clone3 and CLONE_INTO_CGROUP.
    private func spawnInCgroup(_ cgroup: Int32, with fds: [Int32]) -> Result<pid_t, Errno> {
        var argv = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var envp: [UnsafeMutablePointer<CChar>?] = [nil]
        let from = placements.map { fds[$0.source] }
        let to = placements.map(\.target)
        let pid = path.withCString { path in
            argv.withUnsafeMutableBufferPointer { argv in
                envp.withUnsafeMutableBufferPointer { envp in
                    from.withUnsafeBufferPointer { from in
                        to.withUnsafeBufferPointer { to in
                            var request = appd_spawn_request(
                                path: path, argv: argv.baseAddress, envp: envp.baseAddress,
                                from: from.baseAddress, to: to.baseAddress,
                                count: Int32(placements.count),
                                stdin_null: stdinFromDevNull ? 1 : 0,
                                new_session: newSession ? 1 : 0, close_from: closeFrom, error: 0)
                            return appd_spawn_in_cgroup(&request, cgroup)
                        }
                    }
                }
            }
        }
        return pid >= 0 ? .success(pid) : .failure(.current)
    }

    private func posixSpawn(with fds: [Int32]) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if stdinFromDevNull {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        // dup2 clears close-on-exec on the copy; the originals stay close-on-exec.
        for placement in placements {
            posix_spawn_file_actions_adddup2(&actions, fds[placement.source], placement.target)
        }
        let closing = appd_spawn_closefrom(&actions, closeFrom)
        guard closing == 0 else {
            throw AppdError.system("posix_spawn_file_actions_addclosefrom_np", errno: closing)
        }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var all = sigset_t()
        sigfillset(&all)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        // glibc's POSIX_SPAWN_SETSID (0x80) is not in Swift's Glibc module.
        let setsid: Int32 = newSession ? 0x80 : 0
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | setsid))

        var argv = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var envp: [UnsafeMutablePointer<CChar>?] = [nil]
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, &attributes, &argv, &envp)
        guard result == 0 else { throw AppdError.system("start \(path)", errno: result) }
        return pid
    }
}

/// Spawns the daemon's launchers from a thread with an fd table of its own (issue 15).
///
/// posix_spawn copies the calling thread's fd table into the child, which then closes all of
/// it but what it hands over: in the daemon that is two fds per running instance (its exit
/// watcher's pidfd, its lifecycle channel), so every launch at 1,000 instances copied and
/// closed 2,000 fds, each close a flush of its file (3% of all CPU of a 1,000-launch burst, and
/// growing with every instance). A spawner thread unshares its fd table when the daemon starts,
/// while it is small, and keeps only its socket: a launch sends it the fds the launcher gets
/// (SCM_RIGHTS, one message), it spawns with its table of a dozen fds and answers with the pid.
/// The launcher is still the daemon's child (a thread's children are the process's): waitpid,
/// pidfds and the exit watcher are unchanged. One thread per CPU, so that launches side by side
/// spawn side by side, as they did from their own threads.
public final class LauncherSpawner: Sendable {
    private let workers: [Worker]
    /// The workers no launch is using.
    private let idle: Mutex<[Int]>

    /// Starts one thread per CPU (at least two); nil (and launches spawn from their own thread)
    /// if none gets a socket pair and a private fd table.
    public static func start() -> LauncherSpawner? {
        let count = max(2, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        let workers = (0..<min(count, 8)).compactMap { _ in Worker.start() }
        return workers.isEmpty ? nil : LauncherSpawner(workers: workers)
    }

    private init(workers: [Worker]) {
        self.workers = workers
        idle = Mutex(Array(workers.indices))
    }

    /// Spawns `plan` on an idle spawner thread: its sources travel there, and only they are in
    /// the table the child copies. With every thread busy, it spawns from the caller's own
    /// thread, as before: launches side by side never wait for each other here.
    public func spawn(_ plan: SpawnPlan) throws -> pid_t {
        guard let index = idle.withLock({ $0.popLast() }) else {
            return try plan.run(with: plan.sources)
        }
        defer { idle.withLock { $0.append(index) } }
        return try workers[index].spawn(plan)
    }
}

/// One spawner thread and the daemon's end of its socket.
private final class Worker: Sendable {
    private let socket: Int32
    /// The plan of the exchange in flight, and its outcome (one exchange at a time: the
    /// spawner hands a worker to one launch at a time).
    private let current = Mutex<SpawnPlan?>(nil)
    private let result = Mutex<Result<pid_t, AppdError>?>(nil)
    /// Whether the thread got its fd table (set once, before `start` returns).
    private let privateTable = Mutex<Bool>(false)

    static func start() -> Worker? {
        var pair: [Int32] = [-1, -1]
        let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &pair) == 0 else { return nil }
        let worker = Worker(socket: pair[0])
        let ready = DispatchSemaphore(value: 0)
        let end = pair[1]
        let thread = Thread {
            // Its name in top -H and /proc/PID/task/TID/comm.
            _ = appd_set_thread_name("appd-spawner")
            // Only this thread's table: the daemon's other threads keep theirs.
            let isPrivate = appd_private_fd_table(end) == 0
            worker.privateTable.withLock { $0 = isPrivate }
            ready.signal()
            if isPrivate { worker.serve(end) }
        }
        thread.start()
        ready.wait()
        guard worker.privateTable.withLock({ $0 }) else {
            close(pair[0])
            close(pair[1])
            return nil
        }
        return worker
    }

    private init(socket: Int32) { self.socket = socket }

    func spawn(_ plan: SpawnPlan) throws -> pid_t {
        current.withLock { $0 = plan }
        defer { current.withLock { $0 = nil } }
        guard appd_send_fds(socket, 1, plan.sources, Int32(plan.sources.count)) == 0 else {
            throw AppdError.system("hand the launcher's fds to the spawner thread")
        }
        var tag: UInt8 = 0
        var none: Int32 = -1
        guard appd_recv_fds(socket, &tag, &none, 0) >= 0 else {
            throw AppdError.system("the spawner thread's answer")
        }
        guard
            let outcome = result.withLock({ value -> Result<pid_t, AppdError>? in
                defer { value = nil }
                return value
            })
        else { throw AppdError(.io, "the spawner thread answered without a result") }
        return try outcome.get()
    }

    /// The thread: receive, spawn, close what was received, answer. Ends when the daemon's end
    /// of the socket is gone (it never is while the daemon runs).
    private func serve(_ socket: Int32) {
        var fds = [Int32](repeating: -1, count: 16)
        while true {
            var tag: UInt8 = 0
            let count = appd_recv_fds(socket, &tag, &fds, Int32(fds.count))
            if count < 0 && (errno == ECONNRESET || errno == EBADF) { return }
            let outcome: Result<pid_t, AppdError>
            if count < 0 {
                outcome = .failure(AppdError.system("receive the launcher's fds"))
            } else {
                outcome = Self.run(current.withLock { $0 }, received: Array(fds[..<Int(count)]))
            }
            result.withLock { $0 = outcome }
            var none: Int32 = -1
            if appd_send_fds(socket, 0, &none, 0) != 0 { return }
        }
    }

    /// Moves the received fds above every target (they arrive at the lowest free numbers, where
    /// a dup2 could overwrite one before it is placed), spawns, and closes them.
    private static func run(_ plan: SpawnPlan?, received: [Int32]) -> Result<pid_t, AppdError> {
        var moved: [Int32] = []
        defer { for fd in moved + received where fd >= 0 { close(fd) } }
        guard let plan, received.count == plan.sources.count else {
            return .failure(
                AppdError(
                    .io,
                    "the spawner thread got \(received.count) fds for a plan of \(plan?.sources.count ?? 0)"
                ))
        }
        do {
            moved = try plan.movedAboveTargets(received)
            return .success(try plan.run(with: moved))
        } catch let error as AppdError {
            return .failure(error)
        } catch {
            return .failure(AppdError(.io, "\(error)"))
        }
    }
}
