import Foundation
import Glibc
@_exported import TestSupport
import Testing

/// The built `appd serve` (TestSupport's `DaemonProcess`) with unsigned installs allowed and a
/// short idle timeout: started and answering `GET /v1/version` when `init` returns; stopped
/// (SIGTERM, SIGKILL after 10 s) and removed, with whatever it launched and its cgroups, by
/// `stop()` or when the value goes away.
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

    let daemon: DaemonProcess
    var directory: String { daemon.directory }
    var root: String { daemon.root }
    var socket: String { daemon.socket }
    var cgroupParent: String { daemon.cgroupParent }
    let pid: pid_t
    private var stopped = false

    init() throws {
        daemon = try DaemonProcess(label: "appd-robustness")
        // The hostile archives are unsigned: signatures are DaemonTests' and AppContainersTests'.
        // The probe as `swift build` links it loads the toolchain's Swift runtime.
        try
            ("[API]\nSocketGroup=\n[Supervisor]\nCgroupParent=\(daemon.cgroupParent)\n[Signing]\nAllowUnsigned=yes\n"
            + toolchainSystemPaths)
            .write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        _ = Self.fileLimit
        do {
            try daemon.start(arguments: ["--idle-timeout", "\(Self.idleTimeout)"])
        } catch {
            daemon.removeEverything()
            throw error
        }
        pid = daemon.pid ?? -1
    }

    deinit { stop() }

    var stderr: String { daemon.log }

    var isAlive: Bool { daemon.isRunning && kill(pid, 0) == 0 }

    /// SIGTERM, then SIGKILL if it is still there 10 s later; then removes what it left.
    func stop() {
        guard !stopped else { return }
        stopped = true
        if !daemon.stop(within: 10) {
            Issue.record("appd serve did not stop within 10 s of SIGTERM; killed")
        }
        daemon.removeEverything()
    }

    /// Sends SIGTERM and returns how long the daemon took to exit, nil if it did not within
    /// `seconds` (`stop()` kills it then).
    func terminate(within seconds: Double) -> Double? {
        let start = Date()
        kill(pid, SIGTERM)
        return daemon.waitForExit(seconds: seconds) ? Date().timeIntervalSince(start) : nil
    }

    // MARK: Measuring the daemon

    /// What each open fd of the daemon points at (/proc/PID/fd): `socket:[N]`, `pipe:[N]`, a path.
    func openFDTargets() -> [String] {
        let directory = "/proc/\(pid)/fd"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
            return []
        }
        return names.compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\($0)")
        }
    }

    /// Open fds of the daemon, less the registry's. Its SQLite pool opens a reader (the database
    /// and its WAL: 2 fds) the first time that many reads run at once, up to GRDB's 5, and keeps
    /// it: no leak, but a test on a loaded machine can reach a peak its baseline did not
    /// (seen: fuzz, 32 against 30). A leaked connection is a socket, and still counts.
    func openFDCount() -> Int { openFDTargets().filter { !Self.isRegistryReaderFile($0) }.count }

    /// How many of the daemon's fds are its registry readers' (see `openFDCount`).
    func registryFDCount() -> Int { openFDTargets().filter(Self.isRegistryReaderFile).count }

    /// The database and WAL files each registry connection opens (the shared-memory file is one
    /// fd for all of them, and does not grow).
    static func isRegistryReaderFile(_ target: String) -> Bool {
        target.hasSuffix("/registry.sqlite") || target.hasSuffix("/registry.sqlite-wal")
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
        // GET /v1/apps answers from a cache once warm; lookups by id and launches still read the
        // registry, so the SQLite reader pool (a database and a WAL fd per reader) grows here,
        // not later: it opens readers only as concurrent reads need them, up to its maximum, so
        // these rounds are as wide as any test's load (50 threads).
        for _ in 0..<3 {
            _ = try concurrentRequests(count: 50, "GET", "/v1/apps/com.example.warmup")
            _ = try concurrentRequests(count: 50, "POST", "/v1/apps/com.example.warmup/launch")
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
