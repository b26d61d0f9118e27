import AppBundle
import AppContainers
import Foundation
@_exported import TestSupport
import Testing

@testable import AppdConfig

/// A scratch directory removed when the value goes away, even if the test failed.
final class Scratch {
    let path: String

    init(_ label: String = "appd-test") {
        var template = Array("\(NSTemporaryDirectory())/\(label).XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        path = String(cString: template)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func sub(_ name: String) -> String { "\(path)/\(name)" }
}

/// Writes a minimal valid iOS-layout bundle, its executable a copy of the host's `true`, and
/// returns its path.
@discardableResult
func makeBundle(
    at path: String, id: String = "com.example.hello", version: String = "1",
    executable: String = "Hello",
    entitlements: [String: Any]? = ["com.apple.security.app-sandbox": true],
    extraFiles: [String: String] = [:], hostExecutables: [String] = []
) throws -> String {
    let fm = FileManager.default
    try fm.createDirectory(atPath: path, withIntermediateDirectories: true)
    var info: [String: Any] = [
        "CFBundleIdentifier": id, "CFBundleExecutable": executable, "CFBundleVersion": version,
        "CFBundleName": executable, "CFBundlePackageType": "APPL",
    ]
    if !hostExecutables.isEmpty { info["AppdHostExecutables"] = hostExecutables }
    try PropertyListSerialization.data(fromPropertyList: info, format: .xml, options: 0)
        .write(to: URL(fileURLWithPath: "\(path)/Info.plist"))
    if let entitlements {
        try PropertyListSerialization.data(fromPropertyList: entitlements, format: .xml, options: 0)
            .write(to: URL(fileURLWithPath: "\(path)/Entitlements.plist"))
    }
    // The host's `true`: a program that needs nothing but libc, so no interpreter the bundle
    // would have to name in AppdHostExecutables (install refuses a script that does not).
    try Data(contentsOf: URL(fileURLWithPath: "/usr/bin/true")).write(
        to: URL(fileURLWithPath: "\(path)/\(executable)"))
    chmod("\(path)/\(executable)", 0o755)
    for (relative, content) in extraFiles {
        let file = "\(path)/\(relative)"
        try fm.createDirectory(
            atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try content.write(toFile: file, atomically: false, encoding: .utf8)
    }
    return path
}

/// The configuration of the tests that are not about signing: unsigned bundles allowed, as in
/// development. SigningTests use their own.
var unsignedConfig: AppdConfiguration {
    var config = AppdConfiguration()
    config.signing.allowUnsigned = true
    config.signing.unsignedHostExecutables = ["/bin/*", "/usr/bin/*"]
    return config
}

/// The same as a file, for the tests that run appd (`APPD_CONFIG`). One fixed name, written
/// atomically with the same bytes by every test process, so none is left behind per run.
let unsignedConfigFile: String = {
    let path = "\(NSTemporaryDirectory())/appd-test-unsigned-programs.conf"
    try? "[Signing]\nAllowUnsigned=yes\nUnsignedHostExecutables=/bin/* /usr/bin/*\n".write(
        toFile: path, atomically: true, encoding: .utf8)
    return path
}()

func store(_ root: String, config: AppdConfiguration = unsignedConfig) throws -> AppStore {
    try AppStore(root: StateRoot(path: root), config: config, access: .readWrite)
}

func entries(_ path: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
}

func statOf(_ path: String) -> stat? {
    var st = stat()
    return lstat(path, &st) == 0 ? st : nil
}

/// What every state root must look like once recovery has run: staging empty, each container
/// on disk named by exactly one row, each row's containers present.
func expectConsistent(_ root: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let store = try store(root)
    let apps = try store.apps()
    #expect(
        entries(store.root.stagingPath).isEmpty, "staging not empty", sourceLocation: sourceLocation
    )
    #expect(
        Set(entries(store.root.bundleContainersPath)) == Set(apps.compactMap(\.bundleUUID)),
        "bundle containers on disk differ from the registry", sourceLocation: sourceLocation)
    #expect(
        Set(entries(store.root.dataContainersPath)) == Set(apps.map(\.dataUUID)),
        "data containers on disk differ from the registry", sourceLocation: sourceLocation)
    for app in apps {
        if let bundle = app.bundlePath(in: store.root), let exe = app.executable {
            #expect(
                FileManager.default.fileExists(atPath: "\(bundle)/\(exe)"),
                "\(app.bundleID): executable missing", sourceLocation: sourceLocation)
        }
        #expect(
            statOf(app.dataContainer(in: store.root))?.st_uid == app.uid,
            sourceLocation: sourceLocation)
    }
}

/// The `appd` executable built next to this test binary.
var appdExecutable: String { builtExecutable("appd") }

struct RunResult {
    var status: Int32
    var signaled: Bool
    var stdout: String
    var stderr: String
}

/// Runs appd with `args`, extra environment, and an optional kill after `killAfter` seconds.
func runAppd(_ args: [String], environment: [String: String] = [:], killAfter: Double? = nil) throws
    -> RunResult
{
    let process = try ChildProcess(
        appdExecutable, args,
        environment: ProcessInfo.processInfo.environment.merging([
            "APPD_CONFIG": unsignedConfigFile
        ]) { $1 }
        .merging(environment) { $1 }, stderr: .capture)
    if let killAfter {
        Thread.sleep(forTimeInterval: killAfter)
        process.signal(SIGKILL)
    }
    let result = process.finish()
    return RunResult(
        status: result.code, signaled: process.signaled, stdout: result.stdout,
        stderr: result.stderr)
}
