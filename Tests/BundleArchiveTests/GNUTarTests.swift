import BundleArchive
import Foundation
import Testing

/// What admins send with `tar -C Hello.app -cf - . | curl ...` must extract, and what
/// `appd install` sends must be an archive GNU tar reads.
@Suite("compatibility with GNU tar")
struct GNUTarTests {
    static let tar = "/usr/bin/tar"

    @Test(
        "GNU tar's archives extract to the same folder",
        arguments: [
            [], ["--format=posix"], ["--format=ustar"], ["--format=gnu", "--numeric-owner"],
        ])
    func fromGNUTar(options: [String]) throws {
        let scratch = Scratch()
        let source = scratch.sub("Hello.app")
        try makeSampleTree(source)
        // ustar cannot hold a link target over 100 bytes: that format gets the rest.
        if options == ["--format=ustar"] { unlink("\(source)/a/longlink") }
        let result = try run(
            Self.tar, options + ["-C", source, "-cf", scratch.sub("gnu.tar"), "."])
        #expect(result.status == 0, "\(result.errors)")
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: scratch.sub("gnu.tar"))))
        // GNU tar pads to a 10240-byte record with zeros after the end marker.
        #expect(bytes.count % 10240 == 0)

        let out = scratch.directory("out")
        try extract(bytes, into: out, chunks: [4096, 1, 700])
        #expect(snapshot(out) == snapshot(source))
    }

    @Test("GNU tar lists and extracts ours, with long paths, long link targets and modes")
    func toGNUTar() throws {
        let scratch = Scratch()
        let source = scratch.sub("Hello.app")
        try makeSampleTree(source)
        let file = scratch.sub("ours.tar")
        try Data(try archive(of: source)).write(to: URL(fileURLWithPath: file))

        let listed = try run(Self.tar, ["-tvf", file])
        #expect(listed.status == 0)
        #expect(listed.errors.isEmpty, "\(listed.errors)")
        let lines = listed.output.split(separator: "\n")
        #expect(lines.count == 14)
        let long =
            String(repeating: "d", count: 70) + "/" + String(repeating: "e", count: 70)
            + "/long.txt"
        #expect(lines.contains { $0.hasSuffix(" " + long) && $0.hasPrefix("-rw-r--r-- 0/0") })
        #expect(lines.contains { $0.hasPrefix("-rwxr-xr-x 0/0") && $0.hasSuffix(" Hello") })
        #expect(
            lines.contains {
                $0.hasSuffix("a/longlink -> " + String(repeating: "../x/", count: 24) + "target")
            })
        #expect(lines.contains { $0.hasPrefix("drwxr-xr-x 0/0") && $0.hasSuffix(" Empty Folder/") })

        let out = scratch.directory("out")
        let extracted = try run(Self.tar, ["-C", out, "-xf", file])
        #expect(extracted.status == 0)
        #expect(extracted.errors.isEmpty, "\(extracted.errors)")
        #expect(snapshot(out) == snapshot(source))
    }

    @Test("GNU tar's ./ entries and a ustar prefix field are understood")
    func gnuShapes() throws {
        let scratch = Scratch()
        var prefixed = RawEntry.file("file.txt", "in prefix")
        prefixed.prefix = Array("p/q".utf8)
        let bytes = rawArchive([
            .directory("./"), .directory("./d/"), .file("./d/x", "x"), .directory("p/"),
            .directory("p/q/"), prefixed,
        ])
        let out = scratch.directory("out")
        try extract(bytes, into: out)
        #expect(
            snapshot(out) == [
                "d": .directory(mode: 0o755), "d/x": .file(mode: 0o644, contents: Array("x".utf8)),
                "p": .directory(mode: 0o755), "p/q": .directory(mode: 0o755),
                "p/q/file.txt": .file(mode: 0o644, contents: Array("in prefix".utf8)),
            ])
    }
}
