import Foundation
import Testing

/// The new root as Mounts builds it with one pivot_root (docs/launch-path.md, "The launcher"):
/// bind sources cloned from the host before any mount, the records applied after the host is
/// detached.
@Suite("appd-exec: the new root", .serialized)
struct RootTests {
    /// A directory right under the host's /tmp, which the new root's tmpfs covers while the
    /// sandbox is built (Scratch follows $TMPDIR, which may be elsewhere). Removed at the end.
    final class HostTemporary {
        let path: String

        init(_ label: String) throws {
            var template = Array("/tmp/\(label).XXXXXX".utf8CString)
            let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
            try #require(made != nil, "mkdtemp: errno \(errno)")
            path = String(
                decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
            chmod(path, 0o755)
        }

        deinit { try? FileManager.default.removeItem(atPath: path) }

        func sub(_ name: String) -> String { "\(path)/\(name)" }
    }

    @Test("bind sources under /tmp and behind absolute symlinks are bound from the host", rootOnly)
    func sourcesUnderTmpAndSymlinks() throws {
        let host = try HostTemporary("appd-root-sources")
        try FileManager.default.createDirectory(
            atPath: host.sub("real"), withIntermediateDirectories: false)
        try "from-host\n".write(toFile: host.sub("real/file"), atomically: false, encoding: .utf8)
        chmod(host.sub("real"), 0o755)
        chmod(host.sub("real/file"), 0o644)
        // Absolute symlinks: they resolve against the host root, before the new root hides /tmp.
        try FileManager.default.createSymbolicLink(
            atPath: host.sub("dir-link"), withDestinationPath: host.sub("real"))
        try FileManager.default.createSymbolicLink(
            atPath: host.sub("file-link"), withDestinationPath: host.sub("real/file"))
        let result = try run(
            shell(
                "cat /data/plain/file /data/dir/file /data/file; if test -L /data/file; then echo link; fi"
            ),
            extra: [
                "mount ro-bind \(host.sub("real")) /data/plain",
                "mount ro-bind \(host.sub("dir-link")) /data/dir",
                "mount ro-bind \(host.sub("file-link")) /data/file",
                "landlock-fs ro /data",
            ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutLines == ["from-host", "from-host", "from-host"])
    }

    @Test("the root is the tmpfs, and no mount of the host is left in it", rootOnly)
    func nothingOfTheHostIsLeft() throws {
        let result = try run(
            shell(
                "test -e /oldroot && echo oldroot; test -e /newroot && echo newroot;"
                    + " cut -d' ' -f5 /proc/self/mountinfo; echo ROOT $(grep -c ' / / ' /proc/self/mountinfo)"
                    + " $(grep ' / / ' /proc/self/mountinfo | sed 's/.* - //' | cut -d' ' -f1)"))
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdoutLines
        #expect(!lines.contains("oldroot") && !lines.contains("newroot"), "\(lines)")
        #expect(lines.last == "ROOT 1 tmpfs", "\(lines)")
        // Every mount point is one the profile made (sandboxRecords), or a host mount below a
        // ro-bind source, which the recursive bind brings along.
        let allowed = ["/usr", "/etc", "/proc", "/dev", "/tmp"]
        for point in lines.dropLast() where point != "/" {
            #expect(
                allowed.contains { point == $0 || point.hasPrefix($0 + "/") },
                "unexpected mount point \(point) in \(lines)")
        }
    }

    /// The attack: an app plants symlinks in its writable container; at the next launch a
    /// record whose destination goes through that container must not reach the host (the
    /// records are applied with the host root already detached).
    @Test("a symlink an app left in a rw-bind cannot lead a later record to the host", rootOnly)
    func plantedSymlinkStaysInside() throws {
        let host = try HostTemporary("appd-root-planted")
        let container = host.sub("container")
        let target = host.sub("target")
        for directory in [container, target] {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: false)
            chmod(directory, 0o777)
        }
        // What the app wrote at its last run: one link relative (up through the root it was
        // built in) and one absolute, both naming the host directory.
        let first = try run(
            shell(
                "ln -s ../../../../../../../../oldroot\(target) /data/relative"
                    + " && ln -s \(target) /data/absolute && echo planted"),
            extra: ["mount rw-bind \(container) /data", "landlock-fs rw /data"])
        #expect(first.stdoutLines == ["planted"], "\(first.stderr)")
        for link in ["relative", "absolute"] {
            for record in [
                "mount dir /data/\(link)/escaped 755", "mount file /data/\(link)/escaped 644 x",
            ] {
                let result = try run(
                    shell("echo APP-RAN"),
                    extra: ["mount rw-bind \(container) /data", record, "landlock-fs rw /data"])
                // Refused (the link leads nowhere in the new root) or made inside it: either way
                // the host directory stays empty.
                #expect(
                    result.status == 0 || result.stderr.contains("appd-exec: mount:"),
                    "\(result.stderr)")
                let created = try FileManager.default.contentsOfDirectory(atPath: target)
                #expect(created.isEmpty, "\(record) created \(created) on the host")
            }
        }
    }

    /// Runs its arguments with the listed syscalls failing ENOSYS, as on an older kernel: a
    /// seccomp filter installed by python3 (ctypes, prctl) before it execs appd-exec.
    static let olderKernel = """
        import ctypes, os, struct, sys
        def ins(code, jt, jf, k): return struct.pack("<HBBI", code, jt, jf, k)
        prog = ins(0x20, 0, 0, 0)
        for nr in sys.argv[1].split(","):
            prog += ins(0x15, 0, 1, int(nr)) + ins(0x06, 0, 0, 0x00050000 | 38)
        prog += ins(0x06, 0, 0, 0x7FFF0000)
        buf = ctypes.create_string_buffer(prog)
        class fprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
        p = fprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(p), 0, 0) != 0:
            sys.exit("prctl: errno %d" % ctypes.get_errno())
        os.execv(sys.argv[2], sys.argv[2:])
        """

    @Test(
        "without open_tree (two pivots) or mount_setattr (remounts), the sandbox is the same",
        rootOnly,
        arguments: [
            // x86_64 numbers: open_tree 428, mount_setattr 442. Before 5.2 both are missing.
            ("before Linux 5.2", "428,442"), ("Linux 5.2 to 5.11", "442"),
        ])
    func olderKernels(kernel: String, missing: String) throws {
        #if !arch(x86_64)
            return
        #endif
        let host = try HostTemporary("appd-root-older")
        chmod(host.path, 0o777)  // only the mount's read-only flag may refuse the write
        try "from-host\n".write(toFile: host.sub("file"), atomically: false, encoding: .utf8)
        chmod(host.sub("file"), 0o644)
        try Self.olderKernel.write(
            toFile: host.sub("older-kernel.py"), atomically: false, encoding: .utf8)
        let command = shell(
            "cat /data/file; echo x > /data/new 2>/dev/null || echo read-only;"
                + " test -e /oldroot -o -e /newroot && echo host-left;"
                + " grep ' /data ' /proc/self/mountinfo | cut -d' ' -f6;"
                + " grep -c ' / / .* - tmpfs ' /proc/self/mountinfo")
        let result = try launch(
            profile: profileText(
                sandboxRecords() + ["mount ro-bind \(host.path) /data", "landlock-fs rw /data"],
                command: command),
            launcherPrefix: "/usr/bin/python3 \(host.sub("older-kernel.py")) \(missing)")
        #expect(result.status == 0, "\(kernel): \(result.stderr)")
        let lines = result.stdoutLines
        #expect(
            lines.count == 4 && lines.first == "from-host" && lines.last == "1",
            "\(kernel): \(lines)")
        #expect(!lines.contains("host-left"), "\(kernel): \(lines)")
        #expect(lines.contains("read-only"), "\(kernel): \(lines)")
        let flags = lines.count == 4 ? lines[2].split(separator: ",").map(String.init) : []
        #expect(
            flags.contains("ro") && flags.contains("nosuid") && flags.contains("nodev"),
            "\(kernel): the bind's flags \(flags)")
    }

    /// Every bind source is held open (a clone) until its record is applied: more binds than
    /// the launcher's fd limit must still build, and the app gets the limit it would have had.
    @Test("more binds than the fd limit are built, and the app keeps the limit", rootOnly)
    func moreBindsThanDescriptors() throws {
        let host = try HostTemporary("appd-root-many")
        try "many\n".write(toFile: host.sub("file"), atomically: false, encoding: .utf8)
        chmod(host.sub("file"), 0o644)
        let binds = (0..<400).map { "mount ro-bind \(host.sub("file")) /many/\($0)" }
        let result = try launch(
            profile: profileText(
                sandboxRecords() + binds + ["landlock-fs ro /many"],
                command: shell("ulimit -n; cat /many/0 /many/399")),
            launcherPrefix: "/usr/bin/prlimit --nofile=256:")  // the soft limit; the hard one stays
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutLines == ["256", "many", "many"])
    }
}
