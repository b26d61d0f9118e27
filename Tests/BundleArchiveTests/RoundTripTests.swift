import AppdBase
import Foundation
import Testing

@testable import BundleArchive

/// A folder tree with everything a bundle can hold: nested and empty directories, an empty
/// file, an executable, symlinks (one with a target over 100 bytes), a path of 150 bytes, and a
/// file larger than the writer's buffer.
func makeSampleTree(_ root: String) throws {
    mkdir(root, 0o755)
    try writeFile("\(root)/Info.plist", Array("<plist/>\n".utf8))
    try writeFile("\(root)/Hello", Array("#!/bin/sh\necho hello\n".utf8), mode: 0o755)
    try writeFile("\(root)/empty", [])
    try writeFile("\(root)/a/b/c/deep.txt", Array("deep\n".utf8))
    try writeFile("\(root)/big.bin", randomBytes(200_000 + 123, seed: 7))
    let long =
        String(repeating: "d", count: 70) + "/" + String(repeating: "e", count: 70) + "/"
        + "long.txt"
    #expect(long.utf8.count == 150)
    try writeFile("\(root)/\(long)", Array("far down\n".utf8))
    mkdir("\(root)/Empty Folder", 0o755)
    symlink("a/b/c/deep.txt", "\(root)/link")
    symlink(String(repeating: "../x/", count: 24) + "target", "\(root)/a/longlink")
    for directory in [
        "a", "a/b", "a/b/c", String(long.split(separator: "/")[0]), String(long.dropLast(9)),
    ] {
        chmod("\(root)/\(directory)", 0o755)
    }
}

/// Every header of an archive with where it starts, read with the module's own decoder.
func headers(of bytes: [UInt8]) throws -> [(offset: Int, header: TarHeader)] {
    var found: [(offset: Int, header: TarHeader)] = []
    var offset = 0
    while offset + 512 <= bytes.count, bytes[offset..<(offset + 512)].contains(where: { $0 != 0 }) {
        let header = try bytes[offset..<(offset + 512)].withUnsafeBytes {
            try TarHeader.decode($0, position: Int64(offset))
        }
        found.append((offset, header))
        offset += 512 + Int((header.size + 511) / 512 * 512)
    }
    return found
}

@Suite("bundle archive round trip")
struct RoundTripTests {
    @Test(
        "a folder written and extracted again is the same folder, whatever the chunk sizes",
        arguments: [[1], [7], [512], [100_000], [3, 1000, 1, 511, 513, 65536, 9]])
    func roundTrip(chunks: [Int]) throws {
        let scratch = Scratch()
        try makeSampleTree(scratch.sub("Hello.app"))
        let bytes = try archive(of: scratch.sub("Hello.app"))
        let out = scratch.directory("out")
        try extract(bytes, into: out, chunks: chunks)
        let original = snapshot(scratch.sub("Hello.app"))
        #expect(original.count == 14)
        #expect(snapshot(out) == original)
    }

    @Test("random chunk sizes from a seeded generator")
    func randomChunks() throws {
        let scratch = Scratch()
        try makeSampleTree(scratch.sub("Hello.app"))
        let bytes = try archive(of: scratch.sub("Hello.app"))
        var generator = SeededGenerator(seed: 42)
        for round in 0..<5 {
            let chunks = (0..<50).map { _ in Int.random(in: 1...20_000, using: &generator) }
            let out = scratch.directory("out\(round)")
            try extract(bytes, into: out, chunks: chunks)
            #expect(snapshot(out) == snapshot(scratch.sub("Hello.app")))
        }
    }

    @Test("the stream is deterministic: sorted, directories first, no ./, owners and times zero")
    func deterministic() throws {
        let scratch = Scratch()
        try makeSampleTree(scratch.sub("Hello.app"))
        let first = try archive(of: scratch.sub("Hello.app"))
        let second = try archive(of: scratch.sub("Hello.app"))
        #expect(first == second)

        let entries = try headers(of: first)
        for (offset, _) in entries {
            #expect(
                Array(first[(offset + 108)..<(offset + 124)])
                    == Array("0000000\u{0}0000000\u{0}".utf8))
            #expect(Array(first[(offset + 136)..<(offset + 148)]) == Array("00000000000\u{0}".utf8))
        }
        let names = entries.map(\.header).filter { $0.type != UInt8(ascii: "x") }
            .map { String(decoding: $0.name, as: UTF8.self) }
        #expect(names.prefix(4) == ["Empty Folder/", "Hello", "Info.plist", "a/"])
        #expect(names.firstIndex(of: "a/b/") ?? 99 < names.firstIndex(of: "a/b/c/deep.txt") ?? 0)
        #expect(!names.contains { $0.hasPrefix("./") || $0.hasPrefix("/") })
        #expect(first.suffix(1024).allSatisfy { $0 == 0 })
    }

    @Test(
        "modes keep the permission bits as they are, setuid and sticky too, so the daemon refuses what verify refuses"
    )
    func modes() throws {
        let scratch = Scratch()
        let root = scratch.directory("Hello.app")
        try writeFile("\(root)/suid", [1], mode: 0o4755)
        try writeFile("\(root)/private", [2], mode: 0o600)
        mkdir("\(root)/sticky", 0o1777)
        chmod("\(root)/sticky", 0o1777)
        let bytes = try archive(of: root)
        let modes = try Dictionary(
            uniqueKeysWithValues: headers(of: bytes).map {
                (String(decoding: $0.header.name, as: UTF8.self), $0.header.mode)
            })
        #expect(modes == ["suid": 0o4755, "private": 0o600, "sticky/": 0o1777])
    }

    @Test("the writer hands out bounded chunks and never loads a file whole")
    func streams() throws {
        let scratch = Scratch()
        let root = scratch.directory("Big.app")
        try writeFile("\(root)/big", randomBytes(1_000_000, seed: 3))
        var chunks: [Int] = []
        try BundleArchiveWriter.write(bundleAt: root) { chunks.append($0.count) }
        #expect(chunks.count > 10)
        #expect(chunks.allSatisfy { $0 <= BundleArchiveWriter.chunkSize })
        // A header, the data padded to 1 000 448 bytes, the end marker.
        let total: Int = 512 + 1_000_448 + 1024
        #expect(chunks.reduce(0, +) == total)
    }

    @Test("a file of 8 GiB or more gets its size in a pax record, which the extractor honours")
    func hugeSize() throws {
        struct Enough: Error {}
        let scratch = Scratch()
        let root = scratch.directory("Huge.app")
        let fd = open("\(root)/huge", O_WRONLY | O_CREAT | O_EXCL, 0o644)
        try #require(fd >= 0)
        // Sparse: no disk space used, and only the first chunk is ever read.
        let size: Int64 = 8 << 30
        try #require(ftruncate(fd, off_t(size)) == 0)
        close(fd)
        var first: [UInt8] = []
        #expect(throws: Enough.self) {
            try BundleArchiveWriter.write(bundleAt: root) {
                first = Array($0)
                throw Enough()
            }
        }
        let text = String(decoding: first.prefix(1024), as: UTF8.self)
        #expect(text.contains("size=8589934592\n"))
        #expect(first[512 + 156] == UInt8(ascii: "x") || first[156] == UInt8(ascii: "x"))

        // The default MaxTotalBytes is 4 GiB: the pax size is what the extractor checks.
        #expect {
            try extract(Array(first.prefix(2048)), into: scratch.directory("out"))
        } throws: { error in
            (error as? AppdError)?.message.contains("entry 'huge' brings the contents past") == true
        }
    }

    @Test("a symlink to a directory is archived as a link, not followed")
    func symlinkNotFollowed() throws {
        let scratch = Scratch()
        let root = scratch.directory("Hello.app")
        try writeFile(scratch.sub("outside/secret"), Array("secret".utf8))
        symlink("../outside", "\(root)/escape")
        let bytes = try archive(of: root)
        #expect(bytes.count == 512 + 1024)
        #expect(!String(decoding: bytes, as: UTF8.self).contains("secret"))
    }

    @Test("the writer refuses a FIFO, a socket and a symlink for the bundle, naming the path")
    func writerRefuses() throws {
        let scratch = Scratch()
        let root = scratch.directory("Hello.app")
        try writeFile("\(root)/ok", [1])
        mkfifo("\(root)/pipe", 0o644)
        #expect { try archive(of: root) } throws: { error in
            let error = try #require(error as? AppdError)
            return error.code == .invalidBundle
                && error.message.contains("Hello.app/pipe is a FIFO")
        }
        unlink("\(root)/pipe")

        let socketPath = "\(root)/sock"
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: socketPath.utf8 + [0]) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        try #require(bound == 0)
        #expect { try archive(of: root) } throws: { error in
            (error as? AppdError)?.message.contains("Hello.app/sock is a socket") == true
        }

        symlink(root, scratch.sub("Link.app"))
        #expect { try archive(of: scratch.sub("Link.app")) } throws: { error in
            (error as? AppdError)?.message.contains(
                "is a symlink; name the bundle directory itself") == true
        }
    }

    /// As root, every file is readable, so the refusal cannot be seen; for everyone else the
    /// kernel refuses the open, and the writer says which file.
    @Test(
        "a file the caller cannot read is refused, naming it",
        .enabled(if: getuid() != 0, "root reads everything"))
    func unreadable() throws {
        let scratch = Scratch()
        let root = scratch.directory("Hello.app")
        try writeFile("\(root)/secret", [1], mode: 0o000)
        #expect { try archive(of: root) } throws: { error in
            let error = try #require(error as? AppdError)
            return error.code == .permissionDenied && error.message.contains("Hello.app/secret")
        }
    }

    @Test("writing to a file descriptor gives the same stream")
    func toDescriptor() throws {
        let scratch = Scratch()
        try makeSampleTree(scratch.sub("Hello.app"))
        let fd = open(scratch.sub("out.tar"), O_WRONLY | O_CREAT | O_EXCL, 0o644)
        try #require(fd >= 0)
        try BundleArchiveWriter.write(bundleAt: scratch.sub("Hello.app"), toFileDescriptor: fd)
        close(fd)
        let written = try Data(contentsOf: URL(fileURLWithPath: scratch.sub("out.tar")))
        #expect(Array(written) == (try archive(of: scratch.sub("Hello.app"))))
    }
}
