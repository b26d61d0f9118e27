import Foundation
import Testing

/// The records beyond the basic sandbox: files, directories, working directory, limits,
/// console, cgroups, Landlock TCP rules.
@Suite("appd-exec: more records", .serialized)
struct RecordTests {
    @Test("mount file, mount dir, chdir and rlimit take effect", rootOnly)
    func filesDirectoriesLimits() throws {
        let result = try run(
            shell(
                "pwd; cat /etc2/hostname; stat -c '%a' /etc2/hostname /work; ulimit -n; ulimit -c"),
            extra: [
                "mount file /etc2/hostname 0444 \(encodeField("appd-test\nsecond line\n"))",
                "mount dir /work 0700", "chdir /work", "rlimit nofile 64 128",
                "rlimit core 0 unlimited", "landlock-fs ro /etc2",
            ], uid: 0, gid: 0)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            result.stdoutLines == ["/work", "appd-test", "second line", "444", "700", "64", "0"])
    }

    @Test("mount tmpfs takes the record's octal mode", rootOnly)
    func tmpfsModes() throws {
        let result = try run(
            shell("stat -c '%a' /t1 /t2 /t3 /t4 /tmp /dev/shm"),
            extra: [
                "mount tmpfs /t1 1777", "mount tmpfs /t2 0700", "mount tmpfs /t3 751",
                "mount tmpfs /t4 0",
            ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutLines == ["1777", "700", "751", "0", "1777", "1777"])
    }

    @Test("console mounts a private devpts", rootOnly)
    func consoleDevpts() throws {
        let result = try run(
            shell("readlink /dev/ptmx; ls /dev/pts; grep -c devpts /proc/self/mountinfo"),
            extra: ["console"])
        #expect(result.status == 0, "\(result.stderr)")
        // A new instance holds only ptmx, none of the host's terminals.
        #expect(result.stdoutLines == ["pts/ptmx", "ptmx", "1"])
    }

    @Test("the launcher joins the cgroups before it forks", rootOnly)
    func joinsCgroup() throws {
        let cgroup = "/sys/fs/cgroup/unified/appd-launcher-test-\(getpid())"
        try #require(mkdir(cgroup, 0o755) == 0, "cannot create \(cgroup): errno \(errno)")
        defer { rmdir(cgroup) }
        let records = sandboxRecords().map {
            $0.hasPrefix("unshare ") ? "unshare mount pid net ipc uts" : $0
        }
        let result = try launch(
            profile: profileText(
                records + ["cgroup \(cgroup)/cgroup.procs"],
                command: shell("grep '^0::' /proc/self/cgroup")))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutLines == ["0::/\((cgroup as NSString).lastPathComponent)"])
    }

    @Test("Landlock restricts TCP bind to the listed ports", rootOnly)
    func landlockNetwork() throws {
        let script = """
            import socket
            for port in (8081, 8080):
                s = socket.socket()
                try:
                    s.bind(("127.0.0.1", port))
                    print(port, "bound")
                except OSError as e:
                    print(port, e.errno)
            """
        let result = try run(
            ["/usr/bin/python3", "-c", script],
            extra: ["landlock-net-restrict bind", "landlock-net bind 8081"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutLines == ["8081 bound", "8080 \(EACCES)"])
    }
}
