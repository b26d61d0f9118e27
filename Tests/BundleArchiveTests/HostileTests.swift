import AppBundle
import AppdBase
import BundleArchive
import Foundation
import Testing

/// Extracts the archive `make` builds (given the scratch parent) into `parent/out`, next to an
/// empty `parent/victim` that hostile entries aim at. Expects a refusal as `invalidBundle` and
/// returns its message; checks that nothing was created outside `out`.
func refusal(
    limits: BundleLimits = .init(), chunks: [Int] = [1 << 20],
    sourceLocation: SourceLocation = #_sourceLocation,
    _ make: (String) -> [UInt8]
) -> String {
    let scratch = Scratch()
    let out = scratch.directory("out")
    let victim = scratch.directory("victim")
    var message = ""
    do {
        try extract(make(scratch.path), into: out, limits: limits, chunks: chunks)
        Issue.record("the archive was accepted", sourceLocation: sourceLocation)
    } catch let error as AppdError {
        #expect(error.code == .invalidBundle, "\(error)", sourceLocation: sourceLocation)
        message = error.message
    } catch {
        Issue.record("not an AppdError: \(error)", sourceLocation: sourceLocation)
    }
    #expect(listing(scratch.path) == ["out", "victim"], sourceLocation: sourceLocation)
    #expect(listing(victim).isEmpty, sourceLocation: sourceLocation)
    return message
}

func expect(
    _ message: String, _ parts: String..., sourceLocation: SourceLocation = #_sourceLocation
) {
    for part in parts {
        #expect(
            message.contains(part), "'\(message)' does not mention '\(part)'",
            sourceLocation: sourceLocation)
    }
}

@Suite("hostile archives")
struct HostileTests {
    @Test("paths that leave the directory: absolute, ../x, a/../../x")
    func escapingPaths() {
        expect(
            refusal { rawArchive([.file("\($0)/pwned", "x")]) }, "/pwned'", "is an absolute path")
        expect(refusal { _ in rawArchive([.file("../pwned", "x")]) }, "entry '../pwned'", "'..'")
        expect(
            refusal { _ in rawArchive([.directory("a/"), .file("a/../../pwned", "x")]) },
            "entry 'a/../../pwned'", "'..'")
        // A combining mark makes "/\u{301}" one Character to Swift; to the kernel it is a separator.
        expect(refusal { _ in rawArchive([.file("../\u{301}pwned", "x")]) }, "'..'")
        expect(refusal { rawArchive([.file("/\u{301}\($0)/pwned", "x")]) }, "is an absolute path")
        expect(
            refusal { _ in
                rawArchive([.pax([("path", Array("../pwned".utf8))]), .file("harmless", "x")])
            },
            "entry '../pwned'")
        expect(
            refusal { _ in
                rawArchive([
                    RawEntry("././@LongLink", type: "L", data: Array("../../pwned\0".utf8)),
                    .file("ok"),
                ])
            },
            "entry '../../pwned'")
    }

    @Test("names with empty or '.' components, or a NUL")
    func oddNames() {
        expect(refusal { _ in rawArchive([.file("a//b")]) }, "entry 'a//b'", "empty path component")
        expect(refusal { _ in rawArchive([.file("a/./b")]) }, "entry 'a/./b'", "'.' component")
        expect(refusal { _ in rawArchive([.file("./")]) }, "names the extraction directory itself")
        expect(
            refusal { _ in
                rawArchive([.pax([("path", Array("ok\0/../../pwned".utf8))]), .file("x")])
            },
            "entry 'ok\\u{0}/../../pwned'", "NUL")
    }

    /// The links aim at `victim`, next to the extraction directory, rather than at the real
    /// /etc: an extractor that followed them must fail the test, not damage the host.
    @Test("a file or directory through a symlink the archive made, relative or absolute")
    func throughSymlink() {
        expect(
            refusal { _ in
                rawArchive([.symlink("x", to: "../victim"), .file("x/passwd", "root::0:0")])
            },
            "entry 'x/passwd'", "lies below x, which is a symlink")
        expect(
            refusal { _ in rawArchive([.symlink("x", to: "../victim"), .directory("x/sub/")]) },
            "entry 'x/sub/'", "lies below x, which is a symlink")
        expect(
            refusal { _ in rawArchive([.symlink("x", to: "../victim"), .file("x/sub/f")]) },
            "entry 'x/sub/f'", "lies below x, which is a symlink")
        // As `x -> /etc`, but aimed at the victim.
        expect(
            refusal {
                rawArchive([.symlink("x", to: "\($0)/victim"), .file("x/passwd", "root::0:0")])
            },
            "entry 'x'", "is a symlink to the absolute path /", "/victim")
        expect(
            refusal { rawArchive([.symlink("x", to: "\($0)/victim"), .directory("x/cron.d/")]) },
            "entry 'x'", "is a symlink to the absolute path /", "/victim")
        expect(
            refusal { _ in rawArchive([.symlink("x", to: ".."), .symlink("x/victim/y", to: "z")]) },
            "entry 'x/victim/y'", "lies below x")
        expect(
            refusal { _ in rawArchive([.file("f", "data"), .file("f/g")]) }, "entry 'f/g'",
            "lies below f, which is a file")
    }

    @Test(
        "hard links, devices, FIFOs and other types are refused by name",
        arguments: [
            ("1", "a hard link"), ("3", "a character device"), ("4", "a block device"),
            ("6", "a FIFO"),
            ("7", "a contiguous file"), ("S", "a GNU sparse file"), ("V", "a GNU volume label"),
            ("Z", "unknown type 'Z'"),
        ])
    func refusedTypes(type: String, words: String) {
        let entry = RawEntry("thing", type: Character(type), link: "Info.plist")
        expect(
            refusal { _ in rawArchive([.file("Info.plist", "x"), entry]) }, "entry 'thing'", words)
    }

    @Test("GNU sparse files in pax form are refused")
    func paxSparse() {
        expect(
            refusal { _ in
                rawArchive([.pax([("GNU.sparse.major", Array("1".utf8))]), .file("holes", "map")])
            },
            "entry 'holes'", "sparse")
    }

    @Test(
        "an entry that appears twice",
        arguments: [
            [RawEntry.file("a", "1"), .file("a", "2")], [.directory("d/"), .directory("d/")],
            [.file("a"), .directory("a/")], [.symlink("l", to: "a"), .file("l", "x")],
            [.directory("d/"), .file("d")],
        ])
    func duplicates(entries: [RawEntry]) {
        expect(refusal { _ in rawArchive(entries) }, "appears twice")
    }

    @Test("a header with a bad checksum, a garbage size or mode, or no ustar magic")
    func badHeaders() {
        var bad = RawEntry.file("a", "x")
        bad.badChecksum = true
        expect(refusal { _ in rawArchive([bad]) }, "entry 'a'", "bad header checksum")
        for field in ["12a4", "-1", "", "1 2"] {
            var garbage = RawEntry.file("sized", "x")
            garbage.sizeField = Array(field.utf8) + [0]
            expect(refusal { _ in rawArchive([garbage]) }, "entry 'sized'", "bad size field")
        }
        var negative = RawEntry.file("neg", "x")
        negative.sizeField = [UInt8](repeating: 0xFF, count: 12)
        expect(refusal { _ in rawArchive([negative]) }, "entry 'neg'", "bad size field")
        var mode = RawEntry.file("moded", "x")
        mode.mode = "0008644"
        expect(refusal { _ in rawArchive([mode]) }, "entry 'moded'", "bad mode field")
        expect(
            refusal { _ in rawArchive([.pax([("size", Array("12x".utf8))]), .file("a")]) },
            "bad size '12x'")
        expect(
            refusal { _ in
                rawArchive([
                    RawEntry("junk", type: "x", data: Array("99 path=a\n".utf8)), .file("a"),
                ])
            },
            "pax header", "malformed")
        var old = RawEntry.file("v7", "x")
        old.magic = [UInt8](repeating: 0, count: 8)
        expect(refusal { _ in rawArchive([old]) }, "entry 'v7'", "not a ustar or GNU tar header")
        expect(
            refusal { _ in
                Array("this is not a tar archive\n".utf8) + [UInt8](repeating: 0, count: 1000)
            },
            "entry 'this is not a tar archive\\u{a}'")
    }

    @Test("truncated in a header, in file data, between entries, after one zero block")
    func truncated() {
        let whole = rawArchive([
            .file("first", "1"), .file("big", String(repeating: "b", count: 3000)),
        ])
        expect(
            refusal { _ in Array(whole.prefix(1024 + 300)) }, "truncated inside a header",
            "after entry 'first'")
        expect(
            refusal(chunks: [100]) { _ in Array(whole.prefix(1024 + 512 + 1000)) }, "entry 'big'",
            "truncated", "2000 of its 3000")
        expect(
            refusal { _ in Array(whole.prefix(1024)) }, "without its end-of-archive marker",
            "after entry 'first'")
        expect(refusal { _ in Array(whole.dropLast(512)) }, "without its end-of-archive marker")
        expect(refusal { _ in [] }, "without its end-of-archive marker")
        expect(
            refusal { _ in
                rawArchive([.file("a")], end: false) + [UInt8](repeating: 0, count: 512)
                    + rawArchive([.file("b")])
            },
            "lone zero block")
        expect(
            refusal { _ in rawArchive([.file("a")]) + [1] },
            "data follows the end-of-archive marker")
        expect(
            refusal { _ in rawArchive([.pax([("path", Array("x".utf8))])]) },
            "record that has no entry")
    }

    @Test(
        "each limit is enforced: MaxFiles (implicit directories count), MaxTotalBytes, MaxDepth, MaxPathLength"
    )
    func limits() throws {
        var limits = BundleLimits()
        limits.maxFiles = 3
        expect(
            refusal(limits: limits) { _ in
                rawArchive([.file("a"), .file("b"), .file("c"), .file("d")])
            },
            "entry 'd'", "limit of 3 entries (MaxFiles)")
        expect(
            refusal(limits: limits) { _ in rawArchive([.file("a/b/c"), .file("d")]) }, "entry 'd'",
            "MaxFiles")

        limits = BundleLimits()
        limits.maxTotalBytes = 1000
        let half = String(repeating: "h", count: 600)
        expect(
            refusal(limits: limits) { _ in rawArchive([.file("a", half), .file("b", half)]) },
            "entry 'b'", "past 1000 bytes (MaxTotalBytes)")

        limits = BundleLimits()
        limits.maxDepth = 2
        expect(
            refusal(limits: limits) { _ in rawArchive([.directory("a/b/c/")]) }, "entry 'a/b/c/'",
            "3 directories deep", "MaxDepth")
        expect(
            refusal(limits: limits) { _ in rawArchive([.file("a/b/c/f")]) }, "entry 'a/b/c/f'",
            "MaxDepth")
        let scratch = Scratch()
        try extract(rawArchive([.file("a/b/f")]), into: scratch.directory("ok"), limits: limits)

        limits = BundleLimits()
        limits.maxPathLength = 20
        let name = String(repeating: "p", count: 21)
        expect(
            refusal(limits: limits) { _ in rawArchive([.file(name)]) }, "entry '\(name)'",
            "21 bytes", "MaxPathLength")
    }

    @Test("an oversized file or pax record is refused from its header alone, before its data")
    func refusedEarly() throws {
        let scratch = Scratch()
        var limits = BundleLimits()
        limits.maxTotalBytes = 1 << 20
        var huge = RawEntry.file("huge")
        huge.sizeField = Array(String(1 << 30, radix: 8).utf8) + [0]
        var extractor = try BundleArchiveExtractor(into: scratch.directory("out"), limits: limits)
        #expect { try huge.header.withUnsafeBytes { try extractor.consume($0) } } throws: {
            ($0 as? AppdError)?.message.contains(
                "entry 'huge' brings the contents past 1048576 bytes") == true
        }
        #expect(listing(scratch.sub("out")).isEmpty)

        for type: Character in ["x", "L", "K", "g"] {
            var record = RawEntry("PaxHeaders/huge", type: type)
            record.sizeField = Array(String(1 << 20, radix: 8).utf8) + [0]
            var extractor = try BundleArchiveExtractor(
                into: scratch.directory("pax\(type)"), limits: .init())
            #expect { try record.header.withUnsafeBytes { try extractor.consume($0) } } throws: {
                ($0 as? AppdError)?.message.contains(
                    "entry 'PaxHeaders/huge' is a pax or long-name record of 1048576 bytes") == true
            }
        }
    }
}
