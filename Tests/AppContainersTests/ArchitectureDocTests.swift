import Foundation
import TestSupport
import Testing

/// docs/architecture.md names every target and what it depends on; this keeps the tables true to
/// Package.swift, as SwiftPM itself reads it (`swift package dump-package`), so a dependency added
/// to the manifest fails here until the page says so.
@Suite("docs/architecture.md")
struct ArchitectureDocTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    /// Each target of Package.swift with the names of what it depends on (targets, and products
    /// by their product name).
    static func manifestTargets() throws -> [String: [String]] {
        let swift = [
            "\(ProcessInfo.processInfo.environment["SWIFT_ROOT"] ?? "/opt/swift")/usr/bin/swift",
            "/usr/bin/swift",
        ]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let swift else { throw DocFailure("no swift executable to read Package.swift with") }
        // A scratch path of its own: the build directory's lock may be held by `swift test`.
        let scratch = try makeTemporaryDirectory("/var/tmp/appd-dump-package.XXXXXX")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let result = try runTool(
            swift,
            ["package", "--package-path", repository, "--scratch-path", scratch, "dump-package"])
        guard result.code == 0, let start = result.output.firstIndex(of: "{") else {
            throw DocFailure("swift package dump-package failed: \(result.output)")
        }
        let object = try JSONSerialization.jsonObject(with: Data(result.output[start...].utf8))
        guard let targets = (object as? [String: Any])?["targets"] as? [[String: Any]] else {
            throw DocFailure("dump-package printed no targets")
        }
        var map: [String: [String]] = [:]
        for target in targets {
            guard let name = target["name"] as? String else { continue }
            let dependencies = (target["dependencies"] as? [[String: Any]] ?? []).compactMap {
                dependency in
                dependency.values.first.flatMap { ($0 as? [Any])?.first as? String }
            }
            map[name] = dependencies
        }
        return map
    }

    /// The page's table rows: the first column's target names (in backquotes, several to a cell
    /// allowed) with the last column's dependency names.
    static func documentedTargets() throws -> [String: [String]] {
        let page = try String(contentsOfFile: "\(repository)/docs/architecture.md", encoding: .utf8)
        var map: [String: [String]] = [:]
        for line in page.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 2, let last = cells.last else { continue }
            let names = cells[0].split(separator: "`", omittingEmptySubsequences: false)
                .enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
            let dependencies =
                last == "—"
                ? [] : last.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            for name in names { map[name] = dependencies }
        }
        return map
    }

    @Test(
        "every target of Package.swift is on the page with each of its dependencies, and nothing more"
    )
    func tablesMatchTheManifest() throws {
        let manifest = try Self.manifestTargets()
        let documented = try Self.documentedTargets()
        #expect(manifest.count >= 20, "dump-package listed \(manifest.count) targets")
        for (target, dependencies) in manifest.sorted(by: { $0.key < $1.key }) {
            guard let listed = documented[target] else {
                Issue.record(
                    "docs/architecture.md has no row for the target \(target) (Package.swift: \(dependencies))"
                )
                continue
            }
            #expect(
                Set(listed) == Set(dependencies),
                "docs/architecture.md: \(target) depends on \(listed.sorted()); Package.swift says \(dependencies.sorted())"
            )
        }
        for target in documented.keys where manifest[target] == nil {
            Issue.record("docs/architecture.md lists \(target), which Package.swift does not have")
        }
    }
}

struct DocFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
