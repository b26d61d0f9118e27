import AppdBase
import Foundation
import Testing

@testable import AppBundle

/// Real Info.plist and entitlements files from public apps (a copy of the team's
/// shared/fixtures/real-plists, with their sources in SOURCES.tsv, kept in the repository so a
/// fresh clone tests them):
/// each, wrapped into a bundle, either opens or is refused with problems that name a key or the
/// file. Never a crash, never a hang.
@Suite("real-world property lists")
struct FixtureTests {
    static let root: String = {
        if let override = ProcessInfo.processInfo.environment["APPD_FIXTURES"] { return override }
        // Tests/AppBundleTests/FixtureTests.swift → Tests/Fixtures/real-plists
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fixtures/real-plists").path
    }()

    static func files(_ kind: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "\(root)/\(kind)")) ?? []).sorted()
    }

    @Test("the fixtures are there (set APPD_FIXTURES to point elsewhere)")
    func present() {
        #expect(Self.files("info").count >= 10, "no fixtures under \(Self.root)/info")
        #expect(
            Self.files("entitlements").count >= 10, "no fixtures under \(Self.root)/entitlements")
    }

    @Test("each real Info.plist opens or names the offending key", arguments: files("info"))
    func infoPlist(name: String) throws {
        let scratch = Scratch()
        let data = try Data(contentsOf: URL(fileURLWithPath: "\(Self.root)/info/\(name)"))
        // The executable the plist names, if it names a usable one, so only the plist is judged.
        let dict =
            (try? PropertyListSerialization.propertyList(from: data, format: nil)) as? [String: Any]
        let executable = (dict?["CFBundleExecutable"] as? String).flatMap {
            InfoPlist.badExecutableName($0) == nil && !containsBuildPlaceholder($0) ? $0 : nil
        }
        let path = try makeBundle(
            scratch.sub("Fixture.app"), infoData: data, executable: executable ?? "Fixture")
        do {
            let bundle = try AppBundle.open(at: path)
            #expect(!bundle.info.identifier.rawValue.isEmpty)
        } catch let error as AppdError {
            #expect(error.code == .invalidBundle)
            #expect(!error.problems.isEmpty)
            for problem in error.problems {
                #expect(
                    problem.path == "Info.plist" || problem.path == "Fixture",
                    "problem not tied to a file: \(problem)")
                let namesAKey =
                    problem.message.range(of: #"^CFBundle\w+|^\w+ "#, options: .regularExpression)
                    != nil
                #expect(namesAKey || problem.path == "Fixture", "problem names no key: \(problem)")
            }
        }
    }

    @Test(
        "each real entitlements file opens or names the offending key",
        arguments: files("entitlements"))
    func entitlements(name: String) throws {
        let scratch = Scratch()
        let data = try Data(contentsOf: URL(fileURLWithPath: "\(Self.root)/entitlements/\(name)"))
        let path = try makeBundle(scratch.sub("Fixture.app"), entitlements: data)
        do {
            let bundle = try AppBundle.open(at: path)
            let raw =
                try PropertyListSerialization.propertyList(from: data, format: nil)
                as! [String: Any]
            #expect(Set(bundle.entitlements.values.keys) == Set(raw.keys), "a key was dropped")
        } catch let error as AppdError {
            for problem in error.problems {
                #expect(
                    problem.path == "Entitlements.plist", "problem not tied to the file: \(problem)"
                )
                #expect(
                    problem.message.hasPrefix("com.") || problem.message.contains("."),
                    "problem names no key: \(problem)")
            }
        }
    }
}
