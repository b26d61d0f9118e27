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
            path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
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
            shell("cat /data/plain/file /data/dir/file /data/file; test -L /data/file && echo link"),
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
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
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
            for record in ["mount dir /data/\(link)/escaped 755", "mount file /data/\(link)/escaped 644 x"] {
                let result = try run(
                    shell("echo APP-RAN"),
                    extra: ["mount rw-bind \(container) /data", record, "landlock-fs rw /data"])
                // Refused (the link leads nowhere in the new root) or made inside it: either way
                // the host directory stays empty.
                #expect(result.status == 0 || result.stderr.contains("appd-exec: mount:"), "\(result.stderr)")
                let created = try FileManager.default.contentsOfDirectory(atPath: target)
                #expect(created.isEmpty, "\(record) created \(created) on the host")
            }
        }
    }
}
