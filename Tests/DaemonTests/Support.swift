import AppdAPI
import AppdClient
import Foundation
@_exported import TestSupport
import Testing

/// A real `appd serve` (TestSupport's `DaemonProcess`) that trusts a signing key of its own:
/// the probes are signed with it and installed through the daemon as on a host. Stopped, and
/// its root with the apps' cgroups removed, when the value goes away, even if the test failed.
final class TestDaemon {
    let daemon: DaemonProcess
    var directory: String { daemon.directory }
    var root: String { daemon.root }
    var socket: String { daemon.socket }
    var configPath: String { daemon.configPath }
    var cgroupParent: String { daemon.cgroupParent }
    var process: ChildProcess? { daemon.process }
    var client: AppdClient { AppdClient(socketPath: socket, timeout: 30) }

    /// Added to the daemon's environment (the systemd variables of SystemdTests).
    let environment: [String: String]
    /// Added to `appd serve`'s arguments.
    let arguments: [String]
    /// A command that runs `appd serve ...` (appended as its last arguments) and execs it, so
    /// the daemon keeps the pid (JournalTests: a mount namespace with a journal of its own).
    let wrapper: [String]

    /// `root`: a state root of the test's own (its own filesystem), instead of one in the
    /// daemon's folder. `socketName`: serve `--socket <folder>/<socketName>` instead of the
    /// root's default. `hostExecutables`: the test signer's `HostExecutables=` (nil: none).
    /// `toolchain`: apps see the toolchain's Swift runtime (`toolchainSystemPaths`), which the
    /// probe and the samples as `swift build` links them load; a `config` that sets
    /// `SystemPaths=` itself comes after and wins.
    init(
        config: String = "", environment: [String: String] = [:], arguments: [String] = [],
        wrapper: [String] = [],
        root: String? = nil, socketName: String? = nil, hostExecutables: String? = "*",
        toolchain: Bool = true
    ) throws {
        self.environment = environment
        self.arguments = arguments
        self.wrapper = wrapper
        daemon = try DaemonProcess(label: "appd-daemon-test", root: root, socketName: socketName)
        // The daemon trusts a key of its own, and the probes are signed with it (installProbe):
        // installs through the daemon take the same path as on a host.
        try Self.tool(["keygen", "--out", daemon.directory, "--name", "test"])
        try
            ((toolchain ? toolchainSystemPaths : "")
            + "[Supervisor]\nCgroupParent=\(daemon.cgroupParent)\nTerminateGracePeriod=2\n" + config
            + "\n[Signer test]\nKey=test.public-key\nBundleIDs=com.example.*\nEntitlements=*\n"
            + (hostExecutables.map { "HostExecutables=\($0)\n" } ?? ""))
            .write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        try start()
    }

    func start() throws {
        try daemon.start(arguments: arguments, environment: environment, wrapper: wrapper)
    }

    var serveLog: String { daemon.log }

    /// SIGKILL: no chance to clean up anything, as in a crash.
    func crash() { daemon.crash() }

    func stop() { daemon.stop() }

    deinit {
        // Kill what the tests left running, then stop the daemon and remove everything.
        if daemon.isRunning, let live = try? client.get("/v1/instances", as: [APIInstance].self) {
            for instance in live {
                _ = try? client.post("/v1/instances/\(instance.id)/kill", as: APIInstance.self)
            }
            usleep(300_000)
        }
        daemon.removeEverything()
    }

    /// Runs a built command-line tool against this daemon; returns its exit code and output.
    @discardableResult
    func run(_ tool: String, _ arguments: [String]) throws -> (code: Int32, output: String) {
        try Self.run(tool, arguments, environment: ["APPD_ROOT": root, "PATH": "/usr/bin:/bin"])
    }

    static func run(_ tool: String, _ arguments: [String], environment: [String: String]? = nil)
        throws -> (code: Int32, output: String)
    {
        try runTool(tool, arguments, environment: environment)
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
    func installProbe(
        _ id: String, info: String = "", entitlements: String = "", signed: Bool = true
    ) throws {
        let bundle = try makeProbe(id, info: info, entitlements: entitlements)
        if signed { try Self.tool(["sign", "--key", signingKey, bundle]) }
        let result = try run("appd", ["install", bundle])
        guard result.code == 0 else {
            throw DaemonFailure("appd install \(id) failed: \(result.output)")
        }
    }

    /// `Probe.app` with `id` around the built probe, unsigned; returns its path.
    func makeProbe(_ id: String, info: String = "", entitlements: String = "") throws -> String {
        let bundle = "\(directory)/src-\(id)/Probe.app"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: builtExecutable("Probe"), toPath: "\(bundle)/Probe")
        let plist = { (body: String) in
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0"><dict>\(body)</dict></plist>
            """
        }
        try plist(
            """
            <key>CFBundleIdentifier</key><string>\(id)</string><key>CFBundleExecutable</key><string>Probe</string>
            <key>CFBundleName</key><string>Probe</string><key>CFBundleVersion</key><string>1</string>
            <key>CFBundlePackageType</key><string>APPL</string>\(info)
            """
        ).write(toFile: "\(bundle)/Info.plist", atomically: true, encoding: .utf8)
        try plist("<key>com.apple.security.app-sandbox</key><true/>\(entitlements)")
            .write(toFile: "\(bundle)/Entitlements.plist", atomically: true, encoding: .utf8)
        return bundle
    }

    /// Info.plist's `AppdHostExecutables` naming `paths`, for `installProbe`'s `info`: the host
    /// programs the app may run (docs/info-plist.md).
    static func hostExecutables(_ paths: [String]) -> String {
        "<key>AppdHostExecutables</key><array>"
            + paths.map { "<string>\($0)</string>" }.joined() + "</array>"
    }

    func launch(_ id: String, _ arguments: [String]) throws -> APIInstance {
        try client.post(
            "/v1/apps/\(id)/launch", body: LaunchRequest(arguments: arguments), as: APIInstance.self
        )
    }

    /// The path of the app's data container.
    func dataContainer(_ id: String) throws -> String {
        try client.get("/v1/apps/\(id)/containers/data", as: APIContainer.self).path
    }

    func instance(_ iid: String) throws -> APIInstance {
        try client.get("/v1/instances/\(iid)", as: APIInstance.self)
    }

    /// Kills the instance and waits for its end.
    @discardableResult
    func killAndWait(_ iid: String) throws -> APIInstance {
        _ = try client.post("/v1/instances/\(iid)/kill", as: APIInstance.self)
        return try wait(iid)
    }

    /// Waits for the instance to end. 120 s, not the client's 30: jetsam's check, under two
    /// builds beside the suite, took longer than 30 s to end an app.
    func wait(_ iid: String) throws -> APIInstance {
        try AppdClient(socketPath: socket, timeout: 120).get(
            "/v1/instances/\(iid)/wait", as: APIInstance.self)
    }

    func logs(_ iid: String) throws -> String {
        var text = Data()
        try client.stream("/v1/instances/\(iid)/logs") { text.append(contentsOf: $0) }
        return String(decoding: text, as: UTF8.self)
    }

    /// Polls until `condition` holds (or fails the wait after `seconds`).
    func eventually(_ seconds: Double = 30, _ condition: () throws -> Bool) rethrows -> Bool {
        try TestSupport.eventually(seconds, condition)
    }
}

/// CPU ticks (user + system) of every process of an instance's cgroup (both leaves).
func cpuTicks(cgroup: String) -> Int {
    instanceProcesses(cgroup: cgroup).reduce(0) { total, pid in
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return total }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return total + (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
    }
}

/// An instance's output relay: the launcher's child in the host's pid namespace (the sandbox's
/// PID 1 is the other one, with a second NSpid), or nil before it was forked.
func outputRelay(launcher: pid_t) -> pid_t? {
    let children = readKernelFile("/proc/\(launcher)/task/\(launcher)/children")
        .split(separator: " ").compactMap { pid_t($0) }
    return children.first { child in
        let status = readKernelFile("/proc/\(child)/status").split(separator: "\n")
        return status.first { $0.hasPrefix("NSpid:") }?.split(separator: "\t").count == 2
    }
}

/// `/proc/PID/cgroup` of an instance's process with its instance cgroup in place of the leaf it
/// sits in: the launcher and the app are in `<instance>/app`, the output relay in
/// `<instance>/relay` (docs/app-output.md), while the limits are the instance's.
func instanceCgroupLines(of pid: pid_t) -> [Substring] {
    let text = (try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8)) ?? ""
    return text.split(separator: "\n").map { line in
        for leaf in ["/app", "/relay"] where line.hasSuffix(leaf) {
            return line.dropLast(leaf.count)
        }
        return line
    }
}
