import Foundation
import Glibc
import Testing

@testable import AppContainers

/// The removal of trees an app controls: iterative, a bounded number of open fds, whatever the
/// depth and whatever the app put in it (issue 13 §3).
@Suite("removing an app's tree")
struct RemoveTreeTests {
    /// Open fds of this process.
    static func openDescriptors() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
    }

    /// `levels` nested directories under `top/name`, built through fds (paths this deep exceed
    /// PATH_MAX), with the things an app can leave: FIFOs, sockets, symlinks out of the tree,
    /// files and directories of mode 000, a directory of many files.
    static func makeTree(in top: FileDescriptor, _ name: String, levels: Int) throws {
        var dir = try top.makeDirectory(name)
        for level in 0..<levels {
            dir = try dir.makeDirectory("d")
            guard level % 1000 == 999 || level == levels - 1 else { continue }
            #expect(mkfifoat(dir.raw, "fifo", 0o600) == 0)
            let socket = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array("/proc/self/fd/\(dir.raw)/sock".utf8)) }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            #expect(bound == 0)
            close(socket)
            #expect(symlinkat("/", dir.raw, "to-root") == 0)
            #expect(symlinkat("..", dir.raw, "to-parent") == 0)
            let file = openat(dir.raw, "locked", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
            fchmod(file, 0)
            close(file)
            let locked = try dir.makeDirectory("locked-dir")
            close(openat(locked.raw, "inside", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600))
            try locked.chmod(0)
        }
        for index in 0..<3000 {
            close(openat(dir.raw, "f\(index)", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600))
        }
        try dir.chmod(0)
    }

    @Test("a 20,000-level tree with FIFOs, sockets, symlinks and mode-000 entries goes, with at most 3 fds open for it")
    func deepTree() throws {
        let scratch = Scratch("appd-remove-tree")
        let top = try FileDescriptor.directory(scratch.path)
        // What the symlinks point at must survive.
        let outside = try top.makeDirectory("outside")
        close(openat(outside.raw, "keep", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600))
        let building = Date()
        try Self.makeTree(in: top, "tree", levels: 20_000)
        print("built 20,000 levels in \(Date().timeIntervalSince(building)) s")

        let removing = Date()
        defer { print("removed them in \(Date().timeIntervalSince(removing)) s") }
        let before = Self.openDescriptors()
        var most = 0
        var directories = 0
        try top.removeTree("tree") {
            directories += 1
            if directories % 250 == 1 { most = max(most, Self.openDescriptors() - before) }
        }
        #expect(directories >= 20_001)
        #expect(most >= 1 && most <= 3, "fds open during the walk beyond those before it: \(most)")
        #expect(Self.openDescriptors() == before)
        #expect(!top.exists("tree"))
        #expect(outside.exists("keep"))
        #expect(access("/", F_OK) == 0)
    }

    @Test("a tree whose top is mode 000, a lone FIFO, a symlink: each removed without following anything")
    func oddTops() throws {
        let scratch = Scratch("appd-remove-tree")
        let top = try FileDescriptor.directory(scratch.path)
        let closed = try top.makeDirectory("closed")
        _ = try closed.makeDirectory("inner")
        try closed.chmod(0)
        #expect(mkfifoat(top.raw, "fifo", 0o600) == 0)
        let target = try top.makeDirectory("target")
        close(openat(target.raw, "keep", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600))
        #expect(symlinkat("target", top.raw, "link") == 0)
        for name in ["closed", "fifo", "link", "missing"] { try top.removeTree(name) }
        #expect(try top.entries() == ["target"])
        #expect(target.exists("keep"))
    }
}
