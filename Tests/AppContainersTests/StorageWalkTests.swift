import AppdBase
import Foundation
import Glibc
import Testing

@testable import AppContainers

/// The walk behind `appd info`'s sizes (issue 27 §7): allocated blocks, no link followed, each
/// hard-linked file once, and bounded by entries, time and depth.
@Suite("measuring an app's tree")
struct StorageWalkTests {
    /// `bytes` bytes of real data (not sparse) at `path`.
    static func write(_ path: String, bytes: Int) throws {
        try Data(repeating: 0x78, count: bytes).write(to: URL(fileURLWithPath: path))
    }

    static func allocated(_ path: String) -> Int64 {
        var st = stat()
        guard lstat(path, &st) == 0 else { return -1 }
        return Int64(st.st_blocks) * 512
    }

    @Test("counts allocated blocks once per inode, excludes what it is told to, follows no link")
    func counts() throws {
        let scratch = Scratch("storage-walk")
        let tree = scratch.sub("tree")
        try FileManager.default.createDirectory(
            atPath: "\(tree)/Library/Caches", withIntermediateDirectories: true)
        try Self.write("\(tree)/a", bytes: 100_000)
        try Self.write("\(tree)/Library/Caches/c", bytes: 50_000)
        #expect(link("\(tree)/a", "\(tree)/a-again") == 0)
        // A huge file outside, named by links: neither is followed.
        try Self.write(scratch.sub("huge"), bytes: 8 << 20)
        #expect(symlink(scratch.sub("huge"), "\(tree)/link") == 0)
        #expect(symlink(scratch.path, "\(tree)/folder-link") == 0)
        var walk = StorageWalk(limits: .standard)
        let outside = walk.measure(tree, start: ".", excluding: ["./Library/Caches"])
        let library = Self.allocated("\(tree)/Library")
        let links = Self.allocated("\(tree)/link") + Self.allocated("\(tree)/folder-link")
        #expect(outside == Self.allocated("\(tree)/a") + library + links)
        #expect(outside < 1 << 20)
        #expect(
            walk.measure(tree, start: "Library/Caches")
                == Self.allocated("\(tree)/Library/Caches/c"))
        #expect(walk.complete)
        // A start that is a link is not entered.
        #expect(walk.measure(tree, start: "folder-link") == 0)
    }

    @Test("stops at its entry bound and at its time bound, and says so")
    func bounded() throws {
        let scratch = Scratch("storage-walk")
        let tree = scratch.sub("tree")
        try FileManager.default.createDirectory(atPath: tree, withIntermediateDirectories: true)
        for index in 0..<3000 { try Self.write("\(tree)/f\(index)", bytes: 1) }
        var full = StorageWalk(limits: .standard)
        _ = full.measure(tree, start: ".")
        #expect(full.complete && full.entries == 3000)
        var capped = StorageWalk(limits: StorageWalkLimits(maxEntries: 1000, maxSeconds: 60))
        _ = capped.measure(tree, start: ".")
        #expect(!capped.complete && capped.entries == 1000)
        var late = StorageWalk(limits: StorageWalkLimits(maxEntries: 1_000_000, maxSeconds: 0))
        _ = late.measure(tree, start: ".")
        #expect(!late.complete && late.entries == 0)
    }

    @Test("a tree deeper than PATH_MAX is measured as far as it can be and called incomplete")
    func deeperThanPathMax() throws {
        let scratch = Scratch("storage-walk")
        var dir = try FileDescriptor.directory(scratch.path).makeDirectory("tree")
        for _ in 0..<3000 { dir = try dir.makeDirectory("d") }
        var walk = StorageWalk(limits: .standard)
        let bytes = walk.measure(scratch.sub("tree"), start: ".")
        #expect(!walk.complete)
        #expect(bytes > 0 && walk.entries > 1000 && walk.entries < 3000)
        // Removed through fds: the path is too long for FileManager.
        try FileDescriptor.directory(scratch.path).removeTree("tree")
    }
}
