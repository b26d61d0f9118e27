import AppdBase
import Foundation
import Glibc
import Testing

@testable import AppContainers

/// The removal of trees an app controls: iterative, a bounded number of open fds, whatever the
/// depth and whatever the app put in it (issue 13 §3).
@Suite("removing an app's tree")
struct RemoveTreeTests {
    /// Open fds of this process on one of `directories`: other tests run beside this one and
    /// open fds of their own, and paths this deep cannot be read back from /proc/self/fd
    /// (ENAMETOOLONG), so the tree's directories are known by identity.
    static func openDescriptors(on directories: Set<[UInt64]>) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return names.compactMap(Int32.init).filter { fd in
            identity(fd).map(directories.contains) ?? false
        }.count
    }

    /// Device, inode and the inode's generation (FS_IOC_GETVERSION; 0 where the filesystem has
    /// none) of a directory fd, nil for anything else. Device and inode alone are not enough:
    /// the removal frees 20,000 inode numbers, and a test running beside this one that makes
    /// and holds a directory may get one of them (it happened in a full run), while ext4 gives
    /// a reused inode a new generation.
    static func identity(_ fd: Int32) -> [UInt64]? {
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { return nil }
        var generation = 0
        let fsIocGetVersion: UInt = 0x8008_7601  // _IOR('v', 1, long)
        if ioctl(fd, fsIocGetVersion, &generation) != 0 { generation = 0 }
        return [UInt64(info.st_dev), UInt64(info.st_ino), UInt64(UInt(bitPattern: generation))]
    }

    /// `levels` nested directories under `top/name`, built through fds (paths this deep exceed
    /// PATH_MAX), with the things an app can leave: FIFOs, sockets, symlinks out of the tree,
    /// files and directories of mode 000, a directory of many files.
    @discardableResult
    static func makeTree(in top: FileDescriptor, _ name: String, levels: Int) throws -> Set<
        [UInt64]
    > {
        var dir = try top.makeDirectory(name)
        var made: Set<[UInt64]> = []
        func identity(_ dir: FileDescriptor) throws -> [UInt64] {
            try #require(Self.identity(dir.raw))
        }
        made.insert(try identity(dir))
        for level in 0..<levels {
            dir = try dir.makeDirectory("d")
            made.insert(try identity(dir))
            guard level % 1000 == 999 || level == levels - 1 else { continue }
            #expect(mkfifoat(dir.raw, "fifo", 0o600) == 0)
            let socket = try boundUnixSocket(
                SOCK_STREAM, try #require(UnixAddress("/proc/self/fd/\(dir.raw)/sock")))
            close(socket)
            #expect(symlinkat("/", dir.raw, "to-root") == 0)
            #expect(symlinkat("..", dir.raw, "to-parent") == 0)
            let file = openat(dir.raw, "locked", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
            fchmod(file, 0)
            close(file)
            let locked = try dir.makeDirectory("locked-dir")
            made.insert(try identity(locked))
            close(openat(locked.raw, "inside", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600))
            try locked.chmod(0)
        }
        for index in 0..<3000 {
            close(openat(dir.raw, "f\(index)", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600))
        }
        try dir.chmod(0)
        return made
    }

    @Test(
        "a 20,000-level tree with FIFOs, sockets, symlinks and mode-000 entries goes, with at most 3 fds open for it"
    )
    func deepTree() throws {
        let scratch = Scratch("appd-remove-tree")
        let top = try FileDescriptor.directory(scratch.path)
        // What the symlinks point at must survive.
        let outside = try top.makeDirectory("outside")
        close(openat(outside.raw, "keep", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600))
        let tree = try Self.makeTree(in: top, "tree", levels: 20_000)

        #expect(Self.openDescriptors(on: tree) == 0)
        var most = 0
        var directories = 0
        try top.removeTree("tree") {
            directories += 1
            if directories % 250 == 1 { most = max(most, Self.openDescriptors(on: tree)) }
        }
        #expect(directories >= 20_001)
        // The recursive removal held one per level (and died of EMFILE past the fd limit).
        #expect(most >= 1 && most <= 3, "fds open on the tree during the walk: \(most)")
        #expect(Self.openDescriptors(on: tree) == 0)
        #expect(!top.exists("tree"))
        #expect(outside.exists("keep"))
        #expect(access("/", F_OK) == 0)
    }

    @Test(
        "a tree whose top is mode 000, a lone FIFO, a symlink: each removed without following anything"
    )
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
