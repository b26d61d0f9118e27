import AppBundle
import AppContainers
import AppdBase
import Foundation
import Sandbox
import Supervisor
@_exported import TestSupport
import Testing

@testable import AppdConfig

/// An entitlement value for `Entitlements.plist`.
enum Grant {
    case bool(Bool)
    case strings([String])
}

/// A private state root with apps installed from generated bundles, removed (containers,
/// registry, cgroups of its launches) when the value goes away, even if the test failed.
final class SandboxWorld {
    let path: String
    let store: AppStore
    var config: AppdConfiguration

    init(configure: (inout AppdConfiguration) -> Void = { _ in }) throws {
        var template = Array("/var/tmp/appd-sandbox-test.XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard made != nil else { throw AppdError.system("mkdtemp") }
        path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var config = AppdConfiguration()
        // These tests are about the sandbox an app's entitlements build; signing has its own
        // (AppContainersTests, DaemonTests).
        config.signing.allowUnsigned = true
        // Unsigned apps get only the groups an admin lists (docs/code-signing.md).
        config.signing.unsignedGroups = ["group.com.example.*"]
        // And the host programs an app of a test names (`install(hostExecutables:)`).
        config.signing.unsignedHostExecutables = ["*"]
        // Hello as the tests build it (`installHello`) links the toolchain's Swift runtime.
        config.sandbox.systemPaths.append(toolchainRuntime)
        configure(&config)
        self.config = config
        store = try AppStore(
            root: StateRoot(path: "\(path)/root"), config: config, access: .readWrite)
    }

    /// This world's launches go under a cgroup parent of its own: suites run side by side, and
    /// one removing its app folders must not take away the folder another is creating in.
    var cgroupParent: String { "/appd-tests/\(URL(fileURLWithPath: path).lastPathComponent)" }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
        // Each launch removes its own cgroups; the parents go here, deepest first. The shared
        // one stays while another world uses it (rmdir fails), and that one removes it.
        for base in DaemonProcess.cgroupHierarchies {
            DaemonProcess.removeCgroup("\(base)\(cgroupParent)")
            rmdir("\(base)/appd-tests")
        }
    }

    /// Installs the Hello sample (Examples/Hello, the built executable and its greeting.txt) as
    /// `id`; returns the greeting it prints.
    @discardableResult
    func installHello(_ id: String, entitlements: [String: Grant] = [:]) throws -> String {
        let examples = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
                "Examples/Hello")
        let greeting = try String(
            contentsOf: examples.appendingPathComponent("greeting.txt"), encoding: .utf8)
        // As its Info.plist (Examples/Hello): it runs the host's id.
        try install(
            id, name: "Hello", executable: builtExecutable("Hello"), entitlements: entitlements,
            resources: ["greeting.txt": greeting], hostExecutables: ["/usr/bin/id"])
        return greeting
    }

    /// Builds `Name.app` around `executable` (copied in) and installs it; `hostExecutables`:
    /// its Info.plist's `AppdHostExecutables` (the host programs it may run).
    @discardableResult
    func install(
        _ id: String, name: String = "Probe", executable: String = builtExecutable("Probe"),
        entitlements: [String: Grant] = [:], resources: [String: String] = [:],
        sandboxed: Bool = true, hostExecutables: [String] = []
    ) throws -> InstalledApp {
        let bundle = "\(path)/src-\(id)/\(name).app"
        let fm = FileManager.default
        try fm.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try fm.copyItem(atPath: executable, toPath: "\(bundle)/\(name)")
        chmod("\(bundle)/\(name)", 0o755)
        try plist(
            [
                ("CFBundleIdentifier", "<string>\(id)</string>"),
                ("CFBundleExecutable", "<string>\(name)</string>"),
                ("CFBundleName", "<string>\(name)</string>"),
                ("CFBundleVersion", "<string>1</string>"),
                ("CFBundlePackageType", "<string>APPL</string>"),
            ]
                + (hostExecutables.isEmpty
                    ? []
                    : [
                        (
                            "AppdHostExecutables",
                            "<array>" + hostExecutables.map { "<string>\($0)</string>" }.joined()
                                + "</array>"
                        )
                    ])
        ).write(toFile: "\(bundle)/Info.plist", atomically: true, encoding: .utf8)
        var grants = entitlements
        if sandboxed { grants["com.apple.security.app-sandbox"] = .bool(true) }
        try plist(
            grants.sorted { $0.key < $1.key }.map { key, value in
                switch value {
                case .bool(let flag): (key, flag ? "<true/>" : "<false/>")
                case .strings(let items):
                    (key, "<array>" + items.map { "<string>\($0)</string>" }.joined() + "</array>")
                }
            }
        ).write(toFile: "\(bundle)/Entitlements.plist", atomically: true, encoding: .utf8)
        for (file, text) in resources {
            try text.write(toFile: "\(bundle)/\(file)", atomically: true, encoding: .utf8)
        }
        for file in try fm.subpathsOfDirectory(atPath: bundle) where file != name {
            chmod("\(bundle)/\(file)", 0o644)
        }
        chmod(bundle, 0o755)
        return try store.install(bundleAt: bundle).app
    }

    private func plist(_ entries: [(String, String)]) -> String {
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0"><dict>
        \(entries.map { "<key>\($0.0)</key>\($0.1)" }.joined(separator: "\n"))
        </dict></plist>
        """
    }

    func app(_ id: String) throws -> InstalledApp { try store.app(id) }

    func profile(_ id: String, _ arguments: [String] = []) throws -> SandboxProfile {
        try store.sandboxProfile(for: app(id), arguments: arguments)
    }

    /// Launches the app sandboxed, as `appd run` does, and returns its status and output.
    /// `kernel` compiles the profile as for a kernel with fewer layers than this one (the
    /// launcher then applies exactly what that profile says); `adjust` edits the compiled
    /// profile (to show what a rule closes by leaving it out).
    func launch(
        _ id: String, _ arguments: [String] = [], console: Int32? = nil,
        kernel: KernelLayers = .detect(),
        adjust: (inout SandboxProfile) -> Void = { _ in }
    ) throws -> Launched {
        var profile = try store.sandboxProfile(
            for: app(id), arguments: arguments, console: console != nil, kernel: kernel)
        adjust(&profile)
        let outputPath = "\(path)/output-\(UUID().uuidString)"
        let fd = open(outputPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw AppdError.system("open \(outputPath)") }
        defer {
            close(fd)
            unlink(outputPath)
        }
        let launch = SandboxLaunch(
            profile: profile, launcher: builtExecutable("appd-exec"),
            cgroups: CgroupSettings(parent: cgroupParent),
            limits: profile.cgroupLimits, output: fd, input: console)
        let status = try launch.run()
        let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        return Launched(status: status, output: output, profile: profile)
    }
}

/// One finished launch: the probe's `NAME: outcome` lines by name.
struct Launched: CustomStringConvertible {
    var status: AppExitStatus
    var output: String
    var profile: SandboxProfile

    subscript(name: String) -> String? {
        for line in output.split(separator: "\n") where line.hasPrefix(name + ": ") {
            return String(line.dropFirst(name.count + 2))
        }
        return nil
    }

    /// The outcome is a refusal (any errno) or death by signal.
    func refused(_ name: String) -> Bool {
        guard let outcome = self[name] else { return false }
        return outcome.hasPrefix("refused") || outcome.hasPrefix("killed")
    }

    func allowed(_ name: String) -> Bool { self[name] == "allowed" }

    func value(_ name: String) -> String? {
        guard let outcome = self[name], outcome.hasPrefix("value ") else { return nil }
        return String(outcome.dropFirst(6))
    }

    var description: String { "\(status)\n\(output)" }
}

/// A listening abstract unix socket on the host, closed on deinit.
final class AbstractListener {
    let fd: Int32
    let name = "appd-test-\(UUID().uuidString.prefix(8))"

    init() throws {
        guard let address = UnixAddress(name, abstract: true) else {
            throw AppdError.system("abstract name")
        }
        fd = try boundUnixSocket(SOCK_STREAM, address)
        guard listen(fd, 8) == 0 else { throw AppdError.system("listen abstract") }
    }

    deinit { close(fd) }
}
