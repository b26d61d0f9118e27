import AppBundle
import AppContainers
import Foundation

/// How appd prints: text for people on stdout, JSON with `--json`, errors on stderr (or as a
/// JSON `{"error": ...}` object on stdout with `--json`, so scripts read one stream).
enum Output {
    static func json(_ value: some Encodable) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        do {
            var data = try encoder.encode(value)
            data.append(0x0A)
            FileHandle.standardOutput.write(data)
        } catch {
            FileHandle.standardError.write(Data("appd: cannot encode output: \(error)\n".utf8))
        }
    }

    static func fail(_ error: AppdError, json useJSON: Bool) {
        if useJSON {
            json(["error": ErrorView(error)])
        } else {
            FileHandle.standardError.write(Data("appd: \(error)\n".utf8))
        }
    }

    static func note(_ text: String) {
        FileHandle.standardError.write(Data("\(text)\n".utf8))
    }

    static func bytes(_ count: Int64) -> String {
        ByteCountFormatter.string(fromByteCount: count, countStyle: .file)
    }
}

struct ErrorView: Encodable {
    var code: String
    var message: String
    var problems: [BundleProblem]
    var errno: Int32?
    var hint: String?

    init(_ error: AppdError) {
        code = error.code.rawValue
        message = error.message
        problems = error.problems
        errno = error.errno
        hint = error.hint
    }
}

/// An installed app as `list`, `info` and `install` print it.
struct AppView: Encodable {
    var bundleId: String
    var state: String
    var title: String?
    var version: String?
    var shortVersion: String?
    var uid: UInt32
    var gid: UInt32
    var bundleContainer: String?
    var bundlePath: String?
    var dataContainer: String
    var executable: String?
    var layout: String?
    var fileCount: Int?
    var totalBytes: Int64?
    var installedAt: Date
    var updatedAt: Date
    var entitlements: EntitlementsView?

    init(_ app: InstalledApp, root: StateRoot, withEntitlements: Bool) {
        bundleId = app.bundleID
        state = app.state.rawValue
        title = app.title
        version = app.version
        shortVersion = app.shortVersion
        uid = app.uid
        gid = app.gid
        bundleContainer = app.bundleContainer(in: root)
        bundlePath = app.bundlePath(in: root)
        dataContainer = app.dataContainer(in: root)
        executable = app.executable
        layout = app.layout
        fileCount = app.fileCount
        totalBytes = app.totalBytes
        installedAt = app.installedAt
        updatedAt = app.updatedAt
        if withEntitlements, let decoded = try? app.decodedEntitlements() {
            entitlements = EntitlementsView(decoded)
        }
    }

    /// `1.0 (3)`: the marketing version and the build, as Finder and Xcode show them.
    var versionText: String {
        switch (shortVersion, version) {
        case let (short?, build?) where short != build: "\(short) (\(build))"
        case let (_, build?): build
        default: "-"
        }
    }

    func printText() {
        print("\(bundleId)  \(title ?? "")  \(versionText)")
        var rows: [(String, String)] = [("state", state), ("uid/gid", "\(uid)/\(gid)")]
        if let bundlePath { rows.append(("bundle", bundlePath)) }
        rows.append(("data", dataContainer))
        if let executable { rows.append(("executable", "\(executable) (\(layout ?? "?") layout)")) }
        if let fileCount, let totalBytes {
            rows.append(("files", "\(fileCount) (\(Output.bytes(totalBytes)))"))
        }
        let dates = ISO8601DateFormatter()
        rows.append(("installed", dates.string(from: installedAt)))
        rows.append(("updated", dates.string(from: updatedAt)))
        for (label, value) in rows {
            print("  \(label.padding(toLength: 11, withPad: " ", startingAt: 0)) \(value)")
        }
        entitlements?.printText(indent: "  ")
    }
}
