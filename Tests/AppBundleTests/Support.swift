import AppdBase
import Foundation
import Testing

@testable import AppBundle

/// A scratch directory removed when the value goes away, even if the test failed.
final class Scratch {
    let path: String

    init(_ label: String = "appbundle-test") {
        var template = Array("\(NSTemporaryDirectory())/\(label).XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        path = String(cString: template)
    }

    deinit {
        // Sealed test trees may hold read-only directories: open them up before removing.
        for subpath in (try? FileManager.default.subpathsOfDirectory(atPath: path)) ?? [] {
            chmod("\(path)/\(subpath)", 0o755)
        }
        try? FileManager.default.removeItem(atPath: path)
    }

    func sub(_ name: String) -> String { "\(path)/\(name)" }
}

nonisolated(unsafe) let validInfo: [String: Any] = [
    "CFBundleIdentifier": "com.example.hello", "CFBundleExecutable": "Hello",
    "CFBundleVersion": "1", "CFBundleName": "Hello", "CFBundlePackageType": "APPL",
]

func plist(_ value: Any, format: PropertyListSerialization.PropertyListFormat = .xml) -> Data {
    // Only the tests' own values are serialized here: a failure is a broken test, shown as one.
    do {
        return try PropertyListSerialization.data(
            fromPropertyList: value, format: format, options: 0)
    } catch {
        preconditionFailure("a test's property list does not serialize: \(error)")
    }
}

/// Writes an iOS-layout bundle (or macOS with `macos: true`) and returns its path.
@discardableResult
func makeBundle(
    _ path: String, info: [String: Any] = validInfo, infoData: Data? = nil,
    entitlements: Data? = nil, executable: String? = "Hello", macos: Bool = false
) throws -> String {
    let fm = FileManager.default
    let base = macos ? "\(path)/Contents" : path
    try fm.createDirectory(atPath: base, withIntermediateDirectories: true)
    try (infoData ?? plist(info)).write(to: URL(fileURLWithPath: "\(base)/Info.plist"))
    if let entitlements {
        try entitlements.write(to: URL(fileURLWithPath: "\(base)/Entitlements.plist"))
    }
    if let executable {
        let dir = macos ? "\(base)/MacOS" : path
        try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try "#!/bin/sh\necho hello\n".write(
            toFile: "\(dir)/\(executable)", atomically: false, encoding: .utf8)
        chmod("\(dir)/\(executable)", 0o755)
    }
    return path
}

/// The problems `AppBundle.open` reports for the bundle, as text; empty if it opened.
func problems(_ path: String, limits: BundleLimits = .init()) -> [String] {
    do {
        _ = try AppBundle.open(at: path, limits: limits)
        return []
    } catch let error as AppdError {
        return error.problems.isEmpty ? [error.message] : error.problems.map(\.description)
    } catch {
        return ["\(error)"]
    }
}

func write(_ text: String, to path: String) throws {
    try FileManager.default.createDirectory(
        atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    try text.write(toFile: path, atomically: false, encoding: .utf8)
}

/// Signs the bundle at `path` as `appd sign` does: writes `_CodeSignature/CodeResources` and
/// `_CodeSignature/Signature`.
func sign(_ path: String, with identity: SigningIdentity) throws {
    let bundle = try AppBundle.open(at: path)
    let (_, resources, signature) = try bundle.sign(with: identity, limits: .init())
    try FileManager.default.createDirectory(
        atPath: "\(path)/_CodeSignature", withIntermediateDirectories: true)
    try resources.write(to: URL(fileURLWithPath: "\(path)/_CodeSignature/CodeResources"))
    try signature.write(to: URL(fileURLWithPath: "\(path)/_CodeSignature/Signature"))
}

/// What `appd verify` would report about the signature: the problems with the tree, or the
/// error reading the signature, as text; empty when the signature covers exactly this tree.
func signatureProblems(_ path: String) -> [String] {
    do {
        let check = try AppBundle.open(at: path).checkSignature(limits: .init())
        return check.problems.map(\.description)
    } catch let error as AppdError {
        return error.problems.isEmpty ? [error.message] : error.problems.map(\.description)
    } catch {
        return ["\(error)"]
    }
}
