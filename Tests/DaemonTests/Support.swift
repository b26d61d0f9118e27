import AppdAPI
import AppdClient
import Foundation
import Testing

/// Root-only: `appd serve` creates cgroups and launches apps as their own uids. CI sets
/// APPD_REQUIRE_ROOT_TESTS=1 so that these fail there instead of being skipped.
let rootOnly = Testing.ConditionTrait.enabled(
    if: getuid() == 0 || ProcessInfo.processInfo.environment["APPD_REQUIRE_ROOT_TESTS"] == "1",
    "requires root: appd serve creates cgroups and runs apps as their own uids")

/// Executables built next to this test binary.
func builtExecutable(_ name: String) -> String {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    return URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent(name).path
}

/// A real `appd serve` on a private state root under /var/tmp, as a separate process (so a
/// test can SIGKILL it). Stopped, and its root with the apps' cgroups removed, when the value
/// goes away, even if the test failed.
final class TestDaemon {
    let directory: String
    /// The state root: `root` under `directory`, or the one given (a test's own filesystem).
    var root: String { rootOverride ?? "\(directory)/root" }
    private let rootOverride: String?
    var socket: String { "\(root)/run/appd.sock" }
    let configPath: String
    let cgroupParent: String
    private(set) var process: Process?
    var client: AppdClient { AppdClient(socketPath: socket, timeout: 30) }

    /// Added to the daemon's environment (the systemd variables of SystemdTests).
    let environment: [String: String]
    /// Added to `appd serve`'s arguments.
    let arguments: [String]

    init(config: String = "", environment: [String: String] = [:], arguments: [String] = [], root: String? = nil) throws {
        rootOverride = root
        self.environment = environment
        self.arguments = arguments
        var template = Array("/var/tmp/appd-daemon-test.XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw POSIXError(.EIO)
        }
        directory = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        configPath = "\(directory)/appd.conf"
        // Other users (the permission tests' nobody) must reach the socket below it.
        chmod(directory, 0o711)
        // Each daemon's instance cgroups go under a parent of its own, so that cleaning up after
        // one test never touches the cgroups of another running beside it.
        cgroupParent = "/appd-daemon-tests/\(URL(fileURLWithPath: directory).lastPathComponent)"
        // The daemon trusts a key of its own, and the probes are signed with it (installProbe):
        // installs through the daemon take the same path as on a host.
        try Self.tool(["keygen", "--out", directory, "--name", "test"])
        try ("[Supervisor]\nCgroupParent=\(cgroupParent)\nTerminateGracePeriod=2\n" + config
            + "\n[Signer test]\nKey=test.public-key\nBundleIDs=com.example.*\nEntitlements=*\n")
            .write(toFile: configPath, atomically: true, encoding: .utf8)
        try start()
    }

    func start() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: builtExecutable("appd"))
        process.arguments = ["serve", "--root", root, "--config", configPath] + arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let log = FileHandle(forWritingAtPath: "\(directory)/serve.log") ?? {
            FileManager.default.createFile(atPath: "\(directory)/serve.log", contents: nil)
            return FileHandle(forWritingAtPath: "\(directory)/serve.log")!
        }()
        log.seekToEndOfFile()
        process.standardError = log
        process.standardOutput = log
        try process.run()
        self.process = process
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if (try? AppdClient(socketPath: socket, timeout: 2).get("/v1/version", as: APIDaemonInfo.self)) != nil { return }
            guard process.isRunning else { break }
            usleep(50_000)
        }
        throw DaemonFailure("appd serve did not answer on \(socket):\n\(serveLog)")
    }

    var serveLog: String { (try? String(contentsOfFile: "\(directory)/serve.log", encoding: .utf8)) ?? "" }

    /// SIGKILL: no chance to clean up anything, as in a crash.
    func crash() {
        guard let process else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
    }

    func stop() {
        guard let process else { return }
        kill(process.processIdentifier, SIGTERM)
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        self.process = nil
    }

    deinit {
        // Kill what the tests left running, then stop the daemon and remove everything.
        if let live = try? client.get("/v1/instances", as: [APIInstance].self) {
            for instance in live { _ = try? client.post("/v1/instances/\(instance.id)/kill", as: APIInstance.self) }
            usleep(300_000)
        }
        stop()
        if ProcessInfo.processInfo.environment["APPD_KEEP_TEST_DAEMON"] == nil { try? FileManager.default.removeItem(atPath: directory) }
        for hierarchy in ((try? FileManager.default.contentsOfDirectory(atPath: "/sys/fs/cgroup")) ?? []) + [""] {
            let shared = hierarchy.isEmpty ? "/sys/fs/cgroup/appd-daemon-tests" : "/sys/fs/cgroup/\(hierarchy)/appd-daemon-tests"
            let own = "\(shared)/\(URL(fileURLWithPath: cgroupParent).lastPathComponent)"
            // An instance whose end the daemon had not yet handled when it was stopped keeps its
            // (empty) cgroup; the next start would remove it, but this root is gone.
            for app in (try? FileManager.default.contentsOfDirectory(atPath: own)) ?? [] where app.hasPrefix("com.example.") {
                for instance in (try? FileManager.default.contentsOfDirectory(atPath: "\(own)/\(app)")) ?? []
                where instance.count == 12 && instance.allSatisfy(\.isHexDigit) {
                    rmdir("\(own)/\(app)/\(instance)")
                }
                rmdir("\(own)/\(app)")
            }
            rmdir(own)
            // Fails while another test's daemon uses it; the last one removes it.
            rmdir(shared)
        }
    }

    /// Runs a built command-line tool against this daemon; returns its exit code and output.
    @discardableResult
    func run(_ tool: String, _ arguments: [String]) throws -> (code: Int32, output: String) {
        try Self.run(tool, arguments, environment: ["APPD_ROOT": root, "PATH": "/usr/bin:/bin"])
    }

    static func run(_ tool: String, _ arguments: [String], environment: [String: String]? = nil)
        throws -> (code: Int32, output: String)
    {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool.hasPrefix("/") ? tool : builtExecutable(tool))
        process.arguments = arguments
        if let environment { process.environment = environment }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// Runs the built appd with `arguments` outside any daemon (keygen, sign); throws on failure.
    static func tool(_ arguments: [String]) throws {
        let result = try run("appd", arguments)
        guard result.code == 0 else {
            throw DaemonFailure("appd \(arguments.joined(separator: " ")): \(result.output)")
        }
    }

    /// The private key this daemon's config trusts.
    var signingKey: String { "\(directory)/test.signing-key" }

    /// Builds `Probe.app` with `id` around the built probe, signs it with the daemon's trusted
    /// key (unless `signed` is false) and installs it through the daemon with `appd install`,
    /// as a user would.
    func installProbe(_ id: String, info: String = "", signed: Bool = true) throws {
        let bundle = try makeProbe(id, info: info)
        if signed { try Self.tool(["sign", "--key", signingKey, bundle]) }
        let result = try run("appd", ["install", bundle])
        guard result.code == 0 else { throw DaemonFailure("appd install \(id) failed: \(result.output)") }
    }

    /// `Probe.app` with `id` around the built probe, unsigned; returns its path.
    func makeProbe(_ id: String, info: String = "") throws -> String {
        let bundle = "\(directory)/src-\(id)/Probe.app"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: builtExecutable("Probe"), toPath: "\(bundle)/Probe")
        let plist = { (body: String) in
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0"><dict>\(body)</dict></plist>
            """
        }
        try plist("""
            <key>CFBundleIdentifier</key><string>\(id)</string><key>CFBundleExecutable</key><string>Probe</string>
            <key>CFBundleName</key><string>Probe</string><key>CFBundleVersion</key><string>1</string>
            <key>CFBundlePackageType</key><string>APPL</string>\(info)
            """).write(toFile: "\(bundle)/Info.plist", atomically: true, encoding: .utf8)
        try plist("<key>com.apple.security.app-sandbox</key><true/>")
            .write(toFile: "\(bundle)/Entitlements.plist", atomically: true, encoding: .utf8)
        return bundle
    }

    func launch(_ id: String, _ arguments: [String]) throws -> APIInstance {
        try client.post("/v1/apps/\(id)/launch", body: LaunchRequest(arguments: arguments), as: APIInstance.self)
    }

    func instance(_ iid: String) throws -> APIInstance { try client.get("/v1/instances/\(iid)", as: APIInstance.self) }

    func wait(_ iid: String) throws -> APIInstance { try client.get("/v1/instances/\(iid)/wait", as: APIInstance.self) }

    func logs(_ iid: String) throws -> String {
        var text = Data()
        try client.stream("/v1/instances/\(iid)/logs") { text.append(contentsOf: $0) }
        return String(decoding: text, as: UTF8.self)
    }

    /// Polls until `condition` holds (or fails the wait after `seconds`).
    func eventually(_ seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return true }
            usleep(50_000)
        }
        return try condition()
    }
}

struct DaemonFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// CPU ticks (user + system) of every process in a cgroup directory.
func cpuTicks(cgroup: String) -> Int {
    let procs = (try? String(contentsOfFile: "\(cgroup)/cgroup.procs", encoding: .utf8)) ?? ""
    return procs.split(separator: "\n").reduce(0) { total, pid in
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return total }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return total + (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
    }
}
