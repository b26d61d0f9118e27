import AppBundle
import AppdBase
import BundleArchive
import Foundation
import Testing

/// What the extractor makes of archives it accepts.
@Suite("extracting a bundle archive")
struct ExtractorTests {
    @Test("modes become 0644, or 0755 with any exec bit; directories 0755")
    func modes() throws {
        let scratch = Scratch()
        let bytes = rawArchive([
            RawEntry("secret", mode: "0000600"), RawEntry("exec", mode: "0000775"),
            RawEntry("groupexec", mode: "0000610"), RawEntry("d/", type: "5", mode: "0001700"),
        ])
        let out = scratch.directory("out")
        try extract(bytes, into: out)
        #expect(
            snapshot(out) == [
                "secret": .file(mode: 0o644, contents: []),
                "exec": .file(mode: 0o755, contents: []),
                "groupexec": .file(mode: 0o755, contents: []), "d": .directory(mode: 0o755),
            ])
    }

    @Test("parent directories not listed are made; listing them later is not a duplicate")
    func implicitParents() throws {
        let scratch = Scratch()
        let bytes = rawArchive([
            .file("a/b/c.txt", "c"), .directory("a/"), .directory("a/b/"), .file("a/d", "d"),
        ])
        let out = scratch.directory("out")
        try extract(bytes, into: out)
        #expect(
            snapshot(out) == [
                "a": .directory(mode: 0o755), "a/b": .directory(mode: 0o755),
                "a/b/c.txt": .file(mode: 0o644, contents: [99]),
                "a/d": .file(mode: 0o644, contents: [100]),
            ])
    }

    @Test("pax records override the name, the link target and the size; global records are ignored")
    func paxOverrides() throws {
        let scratch = Scratch()
        let long = String(repeating: "n", count: 200)
        var sized = RawEntry.file("short", "0123456789")
        sized.sizeField = Array("00000000000\0".utf8)
        let bytes = rawArchive([
            .pax([("comment", Array("hello".utf8))], type: "g"),
            .pax([("path", Array(long.utf8)), ("mtime", Array("1.5".utf8))]),
            .file("truncated", "long"),
            .pax([("linkpath", Array(long.utf8))]), .symlink("link", to: "ignored"),
            .pax([("size", Array("10".utf8))]), sized,
        ])
        let out = scratch.directory("out")
        try extract(bytes, into: out)
        #expect(
            snapshot(out) == [
                long: .file(mode: 0o644, contents: Array("long".utf8)),
                "link": .symlink(target: long),
                "short": .file(mode: 0o644, contents: Array("0123456789".utf8)),
            ])
    }

    @Test("GNU long names and base-256 sizes are read")
    func gnuExtensions() throws {
        let scratch = Scratch()
        let long = String(repeating: "L", count: 180)
        var big = RawEntry.file("b256", "abc")
        big.sizeField = [0x80] + [UInt8](repeating: 0, count: 10) + [3]
        let bytes = rawArchive([
            RawEntry("././@LongLink", type: "L", data: Array(long.utf8) + [0]), .file("x", "named"),
            RawEntry("././@LongLink", type: "K", data: Array("t/".utf8) + Array(long.utf8) + [0]),
            .symlink("l", to: "x"), big,
        ])
        let out = scratch.directory("out")
        try extract(bytes, into: out)
        #expect(
            snapshot(out) == [
                long: .file(mode: 0o644, contents: Array("named".utf8)),
                "l": .symlink(target: "t/" + long),
                "b256": .file(mode: 0o644, contents: Array("abc".utf8)),
            ])
    }

    @Test("names are bytes: a precomposed é and e with a combining accent are two directories")
    func namesAreBytes() throws {
        let scratch = Scratch()
        let bytes = rawArchive([
            .directory("\u{E9}/"), .directory("e\u{301}/"), .file("e\u{301}/x", "x"),
            .file("\u{E9}/y", "y"),
        ])
        let out = scratch.directory("out")
        try extract(bytes, into: out)
        // Strings would compare the two names equal (and `snapshot` would merge them): look at bytes.
        let names = listing(out).map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
        #expect(names == [Array("e\u{301}".utf8), Array("\u{E9}".utf8)])
        #expect(listing(out + "/e\u{301}") == ["x"])
        #expect(listing(out + "/\u{E9}") == ["y"])
    }

    @Test("zero padding after the end marker is fine; a file named like an escape is kept whole")
    func trailingZeros() throws {
        let scratch = Scratch()
        let bytes =
            rawArchive([.file("..x", "dots"), .file("a..", "dots")])
            + [UInt8](repeating: 0, count: 9000)
        let out = scratch.directory("out")
        try extract(bytes, into: out, chunks: [511])
        #expect(listing(out) == ["..x", "a.."])
    }

    @Test("the directory must exist and be empty")
    func directoryMustBeEmpty() throws {
        let scratch = Scratch()
        #expect {
            _ = try BundleArchiveExtractor(into: scratch.sub("missing"), limits: .init())
        } throws: {
            ($0 as? AppdError)?.code == .notFound
        }
        try writeFile(scratch.sub("full/x"))
        #expect {
            _ = try BundleArchiveExtractor(into: scratch.sub("full"), limits: .init())
        } throws: {
            ($0 as? AppdError)?.code == .exists
        }
    }

    @Test("after an error every later call fails too")
    func errorsStick() throws {
        let scratch = Scratch()
        var extractor = try BundleArchiveExtractor(into: scratch.directory("out"), limits: .init())
        let bad = rawArchive([.file("/abs")])
        let good = rawArchive([.file("fine")])
        #expect(throws: AppdError.self) { try bad.withUnsafeBytes { try extractor.consume($0) } }
        #expect(throws: AppdError.self) { try good.withUnsafeBytes { try extractor.consume($0) } }
        #expect(throws: AppdError.self) { try extractor.finish() }
        #expect(listing(scratch.sub("out")).isEmpty)
    }
}
