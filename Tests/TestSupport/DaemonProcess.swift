import Foundation
import Glibc

/// The built `appd serve` as a separate process on a private state root under /var/tmp: what
/// every daemon-level test suite starts (DaemonTests, DaemonRobustnessTests). Each suite wraps
/// it with its own way of talking to the daemon; the life of the process is here only.
///
/// Everything it makes is private to it (the folder, the socket, `CgroupParent=`), so cleaning
/// up after one test never touches another running beside it.
public final class DaemonProcess: @unchecked Sendable {
    public let directory: String
    /// The state root: `root` in `directory`, or the one given to `init`.
    public var root: String { rootOverride ?? "\(directory)/root" }
    private let rootOverride: String?
    /// The root's default socket, or `--socket <directory>/<socketName>` when `init` was given one.
    public var socket: String { socketName.map { "\(directory)/\($0)" } ?? "\(root)/run/appd.sock" }
    private let socketName: String?
    public var configPath: String { "\(directory)/appd.conf" }
    /// The daemon's stdout and stderr, appended to across restarts.
    public var logPath: String { "\(directory)/serve.log" }
    /// `CgroupParent=` of this daemon: `<shared>/<folder name>`.
    public let cgroupParent: String
    private let sharedCgroupParent: String
    public private(set) var process: ChildProcess?

    /// `label` names the folder (`/var/tmp/<label>.XXXXXX`) and the shared cgroup parent
    /// (`/<label>s`) its own parent goes under.
    public init(label: String, root: String? = nil, socketName: String? = nil) throws {
        rootOverride = root
        self.socketName = socketName
        directory = try makeTemporaryDirectory("/var/tmp/\(label).XXXXXX")
        // Other users (the permission tests' nobody) must reach the socket below it.
        chmod(directory, 0o711)
        sharedCgroupParent = "/\(label)s"
        cgroupParent = "\(sharedCgroupParent)/\(URL(fileURLWithPath: directory).lastPathComponent)"
        FileManager.default.createFile(atPath: logPath, contents: nil)
    }

    public var pid: pid_t? { process?.processIdentifier }
    public var isRunning: Bool { process?.isRunning ?? false }
    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Starts `appd serve --root ROOT --config CONFIG ARGUMENTS` with the environment of the
    /// tests, less the systemd variables unless `environment` sets them, and waits until it
    /// answers `GET /v1/version`. A `wrapper` is a command that runs the daemon's command line
    /// (appended as its last arguments) and execs it, so that the daemon keeps the pid (e.g. a
    /// mount namespace with a journal of its own).
    public func start(
        arguments: [String] = [], environment: [String: String] = [:], wrapper: [String] = [],
        timeout: Double = 20
    ) throws {
        let serve =
            [builtExecutable("appd"), "serve", "--root", root, "--config", configPath]
            + (socketName == nil ? [] : ["--socket", socket]) + arguments
        let command = wrapper + serve
        var inherited = ProcessInfo.processInfo.environment
        for key in [
            "INVOCATION_ID", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "APPD_CONFIG",
            "NOTIFY_SOCKET",
            "JOURNAL_STREAM", "WATCHDOG_USEC", "WATCHDOG_PID",
        ] {
            inherited[key] = nil
        }
        let process = try ChildProcess(
            command[0], Array(command.dropFirst()),
            environment: inherited.merging(environment) { $1 },
            stdout: .append(logPath))
        self.process = process
        let deadline = Date(timeIntervalSinceNow: timeout)
        while Date() < deadline {
            guard process.isRunning else {
                throw DaemonFailure(
                    "appd serve exited (\(process.terminationStatus)) before serving:\n\(log)")
            }
            if Self.answersVersion(socket) { return }
            usleep(50_000)
        }
        throw DaemonFailure(
            "appd serve did not answer GET /v1/version on \(socket) within \(timeout) s:\n\(log)")
    }

    /// SIGKILL: no chance to clean up anything, as in a crash.
    public func crash() {
        guard let process, process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
    }

    /// SIGTERM; true if it exited within `seconds`. It is SIGKILLed otherwise.
    @discardableResult
    public func stop(within seconds: Double = 10) -> Bool {
        guard let process else { return true }
        defer { self.process = nil }
        // An exited process may already be reaped: its pid could be someone else's now.
        guard process.isRunning else { return true }
        kill(process.processIdentifier, SIGTERM)
        if waitForExit(seconds: seconds) { return true }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        return false
    }

    /// Waits for the process to exit by itself (after a signal the test sent).
    public func waitForExit(seconds: Double) -> Bool {
        guard let process else { return true }
        let deadline = Date(timeIntervalSinceNow: seconds)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        return !process.isRunning
    }

    /// Apps keep running when appd stops (the next start re-adopts them): whatever is left in
    /// this daemon's cgroup parent is killed and the cgroups removed bottom-up, in every
    /// hierarchy; then its folder. The shared parent goes when the last daemon leaves it.
    public func removeEverything() {
        stop()
        for hierarchy in Self.cgroupHierarchies {
            Self.removeCgroup("\(hierarchy)\(cgroupParent)")
            rmdir("\(hierarchy)\(sharedCgroupParent)")
        }
        if ProcessInfo.processInfo.environment["APPD_KEEP_TEST_DAEMON"] == nil {
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// The root of every cgroup hierarchy on this host: each v1 controller's, the hybrid v2
    /// tree's (`/sys/fs/cgroup/unified`), and `/sys/fs/cgroup` itself (unified v2).
    public static var cgroupHierarchies: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/sys/fs/cgroup")) ?? [])
            .map { "/sys/fs/cgroup/\($0)" } + ["/sys/fs/cgroup"]
    }

    /// Removes a cgroup and its children, killing what runs in them. Iterative, deepest first.
    public static func removeCgroup(_ top: String) {
        var pending = [top]
        var order: [String] = []
        while let path = pending.popLast() {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else {
                continue
            }
            order.append(path)
            for name in names {
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(
                    atPath: "\(path)/\(name)", isDirectory: &isDirectory),
                    isDirectory.boolValue
                {
                    pending.append("\(path)/\(name)")
                }
            }
        }
        for path in order.reversed() {
            for _ in 0..<100 {
                for pid in readKernelFile("\(path)/cgroup.procs").split(separator: "\n").compactMap(
                    { pid_t($0) })
                {
                    kill(pid, SIGKILL)
                }
                if rmdir(path) == 0 || errno == ENOENT { break }
                usleep(20_000)
            }
        }
    }

    /// One `GET /v1/version` on a fresh connection: true if the answer is 200.
    public static func answersVersion(_ socket: String, timeout: Double = 2) -> Bool {
        let fd = Glibc.socket(
            AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        guard let address = UnixAddress(socket), address.connect(fd) == 0 else { return false }
        let request = Array(
            "GET /v1/version HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".utf8)
        guard
            request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) })
                == request.count
        else { return false }
        var reply: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        let deadline = Date(timeIntervalSinceNow: timeout)
        while reply.count < 12, Date() < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) >= 0 else { return false }
            guard poller.revents != 0 else { continue }
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            reply += buffer[..<count]
        }
        return reply.starts(with: Array("HTTP/1.1 200".utf8))
    }
}

public struct DaemonFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
