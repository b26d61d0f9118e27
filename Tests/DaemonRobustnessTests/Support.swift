import Foundation
import Glibc
import Testing

/// Executables built next to this test binary by `swift build --build-tests`.
func builtExecutable(_ name: String) -> String {
    let exe =
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        ?? CommandLine.arguments[0]
    return ((exe as NSString).deletingLastPathComponent as NSString).appendingPathComponent(name)
}

/// A kernel file (/proc, /sys/fs/cgroup) read with read(2) to its end: such files claim a
/// size of 0, and Foundation's readers may take that at its word.
func readKernelFile(_ path: String) -> String {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return "" }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = read(fd, &buffer, buffer.count)
        guard count > 0 else { break }
        bytes += buffer[..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// The built `appd serve` on a private state root under /var/tmp: started and answering
/// `GET /v1/version` when `init` returns; stopped (SIGTERM, SIGKILL after 10 s) and removed,
/// with whatever it launched and its cgroups, by `stop()` or when the value goes away.
///
/// Shared by the threads of a load test only to make requests, which touch no state of it.
final class TestDaemon: @unchecked Sendable {
    /// `--idle-timeout`: seconds a connection may keep the daemon waiting for a request part.
    static let idleTimeout = 3.0

    /// RLIMIT_NOFILE, raised to 4096 if the hard limit allows: a load test holds 1,000 client
    /// sockets, and the daemon, which inherits the limit, their 1,000 connections.
    static let fileLimit: rlim_t = {
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < 4096 {
            limit.rlim_cur = min(4096, limit.rlim_max)
            setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        }
        return limit.rlim_cur
    }()

    let directory: String
    let root: String
    let socket: String
    let stderrPath: String
    /// `CgroupParent=`, private to this daemon so cleaning it up touches nothing else.
    let cgroupParent: String
    let pid: pid_t
    private let process: Process
    private var stopped = false

    init() throws {
        var template = Array("/var/tmp/appd-robustness.XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw WireError("mkdtemp: \(String(cString: strerror(errno)))")
        }
        directory = String(
            decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        root = "\(directory)/root"
        socket = "\(root)/run/appd.sock"
        stderrPath = "\(directory)/daemon.stderr"
        cgroupParent = "/appd-robustness-" + directory.split(separator: ".").last!
        let config = "\(directory)/appd.conf"
        // The hostile archives are unsigned: signatures are DaemonTests' and AppContainersTests'.
        try "[API]\nSocketGroup=\n[Supervisor]\nCgroupParent=\(cgroupParent)\n[Signing]\nAllowUnsigned=yes\n"
            .write(toFile: config, atomically: true, encoding: .utf8)
        FileManager.default.createFile(atPath: stderrPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))

        _ = Self.fileLimit
        process = Process()
        process.executableURL = URL(fileURLWithPath: builtExecutable("appd"))
        process.arguments = [
            "serve", "--root", root, "--config", config, "--idle-timeout", "\(Self.idleTimeout)",
        ]
        var environment = ProcessInfo.processInfo.environment
        for key in ["INVOCATION_ID", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "APPD_CONFIG"] {
            environment[key] = nil
        }
        process.environment = environment
        process.standardOutput = log
        process.standardError = log
        try process.run()
        try log.close()
        pid = process.processIdentifier
        do {
            try waitUntilServing(timeout: 20)
        } catch {
            stop()
            throw error
        }
    }

    deinit { stop() }

    private func waitUntilServing(timeout: Double) throws {
        let deadline = Date(timeIntervalSinceNow: timeout)
        while Date() < deadline {
            guard process.isRunning else {
                throw WireError(
                    "appd serve exited (\(process.terminationStatus)) before serving:\n\(stderr)")
            }
            if let version = try? request("GET", "/v1/version", timeout: 2), version.status == 200 {
                return
            }
            usleep(50_000)
        }
        throw WireError("appd serve did not answer GET /v1/version within \(timeout) s:\n\(stderr)")
    }

    var stderr: String {
        (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "(no stderr)"
    }

    var isAlive: Bool { process.isRunning && kill(pid, 0) == 0 }

    /// SIGTERM, then SIGKILL if it is still there 10 s later; then removes what it left.
    func stop() {
        guard !stopped else { return }
        stopped = true
        if process.isRunning {
            kill(pid, SIGTERM)
            if !waitForExit(seconds: 10) {
                Issue.record("appd serve did not stop within 10 s of SIGTERM; killed")
                kill(pid, SIGKILL)
                _ = waitForExit(seconds: 5)
            }
        }
        removeCgroups()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Sends SIGTERM and returns how long the daemon took to exit, nil if it did not within
    /// `seconds` (`stop()` kills it then).
    func terminate(within seconds: Double) -> Double? {
        let start = Date()
        kill(pid, SIGTERM)
        return waitForExit(seconds: seconds) ? Date().timeIntervalSince(start) : nil
    }

    private func waitForExit(seconds: Double) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        return !process.isRunning
    }

    /// Apps keep running when appd stops (the next start re-adopts them): this daemon's are
    /// killed here, found in its private cgroup parent, and the cgroups removed bottom-up.
    private func removeCgroups() {
        let hierarchies =
            (try? FileManager.default.contentsOfDirectory(atPath: "/sys/fs/cgroup")) ?? []
        for hierarchy in hierarchies.map({ "/sys/fs/cgroup/\($0)" }) + ["/sys/fs/cgroup"] {
            removeCgroup("\(hierarchy)\(cgroupParent)")
        }
    }

    private func removeCgroup(_ path: String) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return }
        for name in names {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: "\(path)/\(name)", isDirectory: &isDirectory),
                isDirectory.boolValue
            {
                removeCgroup("\(path)/\(name)")
            }
        }
        for _ in 0..<100 {
            let procs = readKernelFile("\(path)/cgroup.procs")
            for pid in procs.split(separator: "\n").compactMap({ pid_t($0) }) { kill(pid, SIGKILL) }
            if rmdir(path) == 0 || errno == ENOENT { return }
            usleep(20_000)
        }
    }

    // MARK: Measuring the daemon

    /// Open file descriptors of the daemon (/proc/PID/fd).
    func openFDCount() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    /// Resident memory of the daemon (VmRSS of /proc/PID/status).
    func rssBytes() -> Int {
        let status = readKernelFile("/proc/\(pid)/status")
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { return -1 }
        return kilobytes * 1024
    }

    /// The fd count once it is back to `baseline`, or what it still is after `timeout` seconds:
    /// connections close a little after their answer.
    func fdCount(settlingTo baseline: Int, timeout: Double = 5) -> Int {
        let deadline = Date(timeIntervalSinceNow: timeout)
        var count = openFDCount()
        while count > baseline && Date() < deadline {
            usleep(50_000)
            count = openFDCount()
        }
        return count
    }

    /// The fd count when nothing is going on; the first requests open the registry's readers,
    /// so it is taken after a few rounds of concurrent ones.
    func settledFDBaseline() throws -> Int {
        _ = try concurrentRequests(count: 20, "GET", "/v1/apps")
        // GET /v1/apps answers from a cache once warm; a lookup by id still reads the registry,
        // so the SQLite reader pool (a database and a WAL fd per reader, at most GRDB's 5)
        // grows here, not later. From 50 threads, as the load tests do: the daemon accepts
        // without waiting for its request tasks, so their lookups overlap and grow the pool
        // (seen: +2 fds after the 50-thread test when warmed by one burst of 20).
        _ = try concurrentRequests(count: 20, "GET", "/v1/apps/com.example.warmup")
        let daemon = self
        DispatchQueue.concurrentPerform(iterations: 50) { _ in
            for _ in 0..<4 { _ = try? daemon.request("GET", "/v1/apps/com.example.warmup") }
        }
        _ = try concurrentRequests(count: 20, "GET", "/v1/version")
        var previous = -1
        var count = openFDCount()
        for _ in 0..<40 where count != previous {
            usleep(100_000)
            (previous, count) = (count, openFDCount())
        }
        return count
    }
}
