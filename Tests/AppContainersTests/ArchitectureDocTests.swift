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

    /// A target of Package.swift: what it depends on (targets, and products by their product
    /// name), its kind, and the folder of its sources.
    struct ManifestTarget {
        let dependencies: [String]
        let kind: String
        let folder: String
    }

    /// Each target of Package.swift with the names of what it depends on.
    static func manifestTargets() throws -> [String: [String]] {
        try manifest().mapValues(\.dependencies)
    }

    /// Each target of Package.swift, as SwiftPM reads it.
    static func manifest() throws -> [String: ManifestTarget] {
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
        var map: [String: ManifestTarget] = [:]
        for target in targets {
            guard let name = target["name"] as? String, let kind = target["type"] as? String
            else { continue }
            let dependencies = (target["dependencies"] as? [[String: Any]] ?? []).compactMap {
                dependency in
                dependency.values.first.flatMap { ($0 as? [Any])?.first as? String }
            }
            let folder =
                target["path"] as? String ?? "\(kind == "test" ? "Tests" : "Sources")/\(name)"
            map[name] = ManifestTarget(dependencies: dependencies, kind: kind, folder: folder)
        }
        return map
    }

    /// The modules a target's sources import: the `import` lines of each file's head (attributes
    /// and access levels allowed, `#if` blocks included), up to its first declaration, so a
    /// program quoted in a string further down (the Python of a test) is not read as Swift.
    static func imports(folder: String) throws -> [String: Set<String>] {
        var found: [String: Set<String>] = [:]
        let root = "\(repository)/\(folder)"
        guard let walk = FileManager.default.enumerator(atPath: root) else { return [:] }
        for case let file as String in walk where file.hasSuffix(".swift") {
            let text = try String(contentsOfFile: "\(root)/\(file)", encoding: .utf8)
            for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
                let words = line.split(separator: " ").filter {
                    !$0.hasPrefix("@")
                        && !["public", "internal", "package", "private"].contains($0)
                }
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if words.first == "import", words.count >= 2 {
                    let kinds = ["struct", "class", "enum", "func", "var", "protocol", "typealias"]
                    let name =
                        kinds.contains(String(words[1])) && words.count >= 3 ? words[2] : words[1]
                    let module = String(name.split(separator: ".").first ?? name)
                    found[module, default: []].insert(file)
                } else if !(trimmed.isEmpty || trimmed.hasPrefix("//") || trimmed.hasPrefix("#")) {
                    break
                }
            }
        }
        return found
    }

    /// What any target may import without naming it in Package.swift: the toolchain's modules.
    static let toolchainModules: Set<String> = [
        "Foundation", "FoundationEssentials", "FoundationNetworking", "Glibc", "Musl", "Darwin",
        "Dispatch",
        "Synchronization", "Testing", "XCTest", "_Concurrency",
    ]

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

extension ArchitectureDocTests {
    @Test(
        "every module a target's sources import is one of its dependencies on the page, and each library it depends on is imported"
    )
    func importsMatchTheTable() throws {
        let manifest = try Self.manifest()
        let documented = try Self.documentedTargets()
        var checked = 0
        for (target, entry) in manifest.sorted(by: { $0.key < $1.key }) where entry.kind != "system"
        {
            let allowed = Set(
                (documented[target] ?? []).map { $0.replacingOccurrences(of: "-", with: "_") })
            let imported = try Self.imports(folder: entry.folder)
            checked += imported.isEmpty ? 0 : 1
            let own = target.replacingOccurrences(of: "-", with: "_")
            for (module, files) in imported.sorted(by: { $0.key < $1.key })
            where !allowed.contains(module) && !Self.toolchainModules.contains(module)
                && module != own
            {
                Issue.record(
                    "\(target) imports \(module) (\(files.sorted().prefix(3).joined(separator: ", "))), which docs/architecture.md and Package.swift do not list as its dependency"
                )
            }
            // An executable dependency is there to be built (a test runs it), not imported.
            for dependency in documented[target] ?? []
            where manifest[dependency]?.kind != "executable"
                && imported[dependency.replacingOccurrences(of: "-", with: "_")] == nil
            {
                Issue.record(
                    "\(target) depends on \(dependency) but none of its sources imports it")
            }
        }
        #expect(checked >= 30, "only \(checked) targets had imports to check")
    }
}

extension ArchitectureDocTests {
    @Test("the page's list of the `--fast` targets is scripts/test's fast_targets")
    func fastTargetsMatchTheScript() throws {
        let script = try String(contentsOfFile: "\(Self.repository)/scripts/test", encoding: .utf8)
        guard let start = script.range(of: "fast_targets=("),
            let end = script[start.upperBound...].firstIndex(of: ")")
        else { throw DocFailure("scripts/test has no fast_targets=( ... )") }
        let scripted = Set(
            script[start.upperBound..<end].split(whereSeparator: \.isWhitespace).map(String.init))
        let page = try String(
            contentsOfFile: "\(Self.repository)/docs/architecture.md", encoding: .utf8)
        guard let item = page.range(of: "- Unit, in `--fast`"),
            let itemEnd = page[item.upperBound...].range(of: "\n- ")
        else { throw DocFailure("docs/architecture.md has no \"- Unit, in `--fast`\" item") }
        let listed = Set(
            page[item.upperBound..<itemEnd.lowerBound].split(whereSeparator: {
                !$0.isLetter && !$0.isNumber
            })
            .map(String.init).filter { $0.hasSuffix("Tests") && $0 != "ArchitectureDocTests" })
        #expect(scripted.count >= 5, "fast_targets: \(scripted.sorted())")
        #expect(
            listed == scripted,
            "docs/architecture.md lists \(listed.subtracting(scripted).sorted()) that scripts/test does not run, and omits \(scripted.subtracting(listed).sorted())"
        )
    }
}

struct DocFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
