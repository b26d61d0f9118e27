import AppBundle
import AppdBase
import BundleArchive
import Foundation
import Testing

/// Issue 13 §7: the daemon's path (archive → extractor) refuses what `appd verify` and
/// `install --no-daemon` refuse (BundleWalker.modeProblems), naming the entry.
@Suite("permission bits: one rule for a folder and an archive")
struct ModeRuleTests {
    static let refused: [(mode: String, type: Character, name: String, problem: String)] = [
        ("0004755", "0", "Probe", "is setuid or setgid"),
        ("0002755", "0", "bin/helper", "is setuid or setgid"),
        ("0000666", "0", "Resources/data", "is world-writable"),
        ("0000777", "5", "Shared/", "the directory is world-writable"),
    ]

    @Test(
        "setuid, setgid and world-writable entries in an archive are refused, naming the entry",
        arguments: 0..<refused.count)
    func archive(_ index: Int) throws {
        let (mode, type, name, problem) = Self.refused[index]
        let scratch = Scratch()
        let bytes = rawArchive([.file("Info.plist", "x"), RawEntry(name, type: type, mode: mode)])
        do {
            try extract(bytes, into: scratch.directory("out"))
            Issue.record("\(name) with mode \(mode) was extracted")
        } catch let error as AppdError {
            let shown = name.hasSuffix("/") ? String(name.dropLast()) : name
            #expect(error.code == .invalidBundle)
            #expect(
                error.message.contains("entry '\(shown)") && error.message.contains(problem),
                "\(error.message)")
        }
    }

    @Test("the rule is the walker's: the same bits give the same words")
    func sameWords() {
        #expect(BundleWalker.modeProblems(0o4755, isDirectory: false) == ["is setuid or setgid"])
        #expect(
            BundleWalker.modeProblems(0o6777, isDirectory: false) == [
                "is setuid or setgid", "is world-writable",
            ])
        #expect(
            BundleWalker.modeProblems(0o777, isDirectory: true) == [
                "the directory is world-writable"
            ])
        #expect(BundleWalker.modeProblems(0o1755, isDirectory: true).isEmpty)
        #expect(BundleWalker.modeProblems(0o755, isDirectory: false).isEmpty)
    }

    @Test("the client's archive keeps setuid and setgid bits, so the daemon sees them")
    func writerKeepsBits() throws {
        let scratch = Scratch()
        let source = scratch.directory("Probe.app")
        try writeFile("\(source)/Probe", Array("x".utf8), mode: 0o755)
        chmod("\(source)/Probe", 0o4755)
        let bytes = try BundleArchiveTests.archive(of: source)
        // The mode field of the first header: octal at offset 100.
        let field = String(decoding: bytes[100..<107], as: UTF8.self)
        #expect(Int(field, radix: 8) == 0o4755, "mode field '\(field)'")
        #expect(throws: AppdError.self) { try extract(bytes, into: scratch.directory("out")) }
    }
}
