import Foundation
import Testing

/// What the app can see and do inside the sandbox.
@Suite("appd-exec: the sandbox", .serialized)
struct ConfinementTests {
    @Test("the environment is exactly the env records", rootOnly)
    func environmentIsExact() throws {
        let records = ["PATH=/usr/bin:/bin", "HOME=/home/app", "SPACED=a b\tc", "EMPTY="]
        let profile = profileText(
            sandboxRecords().filter { !$0.hasPrefix("env ") }
                + records.map { "env \(encodeField($0))" },
            command: ["/usr/bin/env"])
        let result = try launch(profile: profile, environment: ["APPD_LEAK_CHECK": "leaked"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutLines == records)
    }

    @Test("uid, gid and groups are the profile's; no privileges are left", rootOnly)
    func identityAndPrivileges() throws {
        let profile = profileText(
            sandboxRecords(uid: 1234, gid: 2345).filter { !$0.hasPrefix("groups ") }
                + ["groups 3456 4567"],
            command: shell(
                "id -u; id -g; id -G; grep -E '^(Cap|NoNewPrivs|Seccomp:)' /proc/self/status"))
        let confined = try launch(profile: profile)
        #expect(confined.status == 0, "\(confined.stderr)")
        let lines = confined.stdoutLines
        #expect(Array(lines.prefix(3)) == ["1234", "2345", "2345 3456 4567"])
        let status = Dictionary(
            lines.dropFirst(3).compactMap { line -> (String, String)? in
                let parts = line.split(separator: ":", maxSplits: 1)
                guard parts.count == 2 else { return nil }
                return (String(parts[0]), parts[1].trimmingCharacters(in: .whitespaces))
            }, uniquingKeysWith: { $1 })
        #expect(status["NoNewPrivs"] == "1")
        #expect(status["Seccomp"] == "2")
        for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
            #expect(status[set] == "0000000000000000", "\(set)")
        }
    }

    @Test("the app is not PID 1 and sees no host processes", rootOnly)
    func pidNamespace() throws {
        let result = try run(shell("echo $$; ls /proc"))
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdoutLines
        let pid = try #require(lines.first.flatMap { Int($0) })
        #expect(pid != 1)
        let pids = lines.dropFirst().compactMap { Int($0) }
        #expect(pids.contains(1), "PID 1 is the launcher's reaper")
        #expect(pids.contains(pid))
        #expect(pids.count <= 3, "only PID 1, the shell and ls: \(pids)")
    }

    @Test("the host's /tmp and /root are not visible", rootOnly)
    func hostFilesAreHidden() throws {
        let scratch = Scratch()
        let marker = scratch.sub("marker")
        try "host".write(toFile: marker, atomically: false, encoding: .utf8)
        #expect(FileManager.default.fileExists(atPath: "/root"))
        let result = try run(
            shell(
                "test -e '\(marker)' && echo marker-visible; test -e /root && echo root-visible;"
                    + " ls -A /tmp | wc -l"))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutLines == ["0"])
    }

    @Test("a ro-bind cannot be written, a rw-bind can", rootOnly)
    func readOnlyBind() throws {
        let scratch = Scratch()
        let readOnly = try scratch.openDirectory("ro")
        let readWrite = try scratch.openDirectory("rw")
        // Landlock allows both, and the directories are 0777: only the mount flags differ.
        let result = try run(
            shell("echo a > /data/ro/file; echo b > /data/rw/file && echo wrote-rw"),
            extra: [
                "mount ro-bind \(readOnly) /data/ro", "mount rw-bind \(readWrite) /data/rw",
                "landlock-fs rw /data",
            ])
        #expect(result.stdoutLines == ["wrote-rw"], "\(result.stderr)")
        #expect(result.stderr.contains("Read-only file system"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(readOnly)/file"))
        #expect((try? String(contentsOfFile: "\(readWrite)/file", encoding: .utf8)) == "b\n")
    }

    @Test("Landlock refuses writes outside the rw paths", rootOnly)
    func landlockConfinesWrites() throws {
        let scratch = Scratch()
        let writable = try scratch.openDirectory("writable")
        let readable = try scratch.openDirectory("readable")
        try "seen\n".write(toFile: "\(readable)/existing", atomically: false, encoding: .utf8)
        // Both are rw binds of 0777 directories: only Landlock tells them apart.
        let result = try run(
            shell(
                "cat /readable/existing; echo > /readable/new; echo ok > /writable/new"
                    + " && echo wrote"),
            extra: [
                "mount rw-bind \(writable) /writable", "mount rw-bind \(readable) /readable",
                "landlock-fs rw /writable", "landlock-fs ro /readable",
            ])
        #expect(result.stdoutLines == ["seen", "wrote"], "\(result.stderr)")
        #expect(result.stderr.contains("Permission denied"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(readable)/new"))
        #expect(FileManager.default.fileExists(atPath: "\(writable)/new"))
    }

    @Test("the seccomp filter from the fd is installed", rootOnly)
    func seccompFilterApplies() throws {
        let result = try run(
            shell("uname -n || echo uname-failed"), seccomp: BPF.deny(syscall: BPF.unameNumber))
        #expect(result.stdoutLines == ["uname-failed"], "\(result.stderr)")
        #expect(result.stderr.contains("Operation not permitted"))
    }

    @Test("the hostname is the profile's, and lo is up", rootOnly)
    func hostnameAndLoopback() throws {
        let result = try run(
            shell(
                "cat /proc/sys/kernel/hostname; cat /sys/class/net/lo/operstate 2>/dev/null; grep -c . /proc/net/dev"
            ))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutLines.first == "appd-test")
        // /proc/net/dev: two header lines and lo only (a private net namespace).
        #expect(result.stdoutLines.last == "3")
    }

    @Test("fds beyond 2 are not inherited", rootOnly)
    func descriptorsAreClosed() throws {
        let result = try run(
            ["/usr/bin/ls", "/proc/self/fd"], extraRedirections: "6</etc/hostname 9</etc/passwd")
        #expect(result.status == 0, "\(result.stderr)")
        // 3 is ls's own handle on the directory it lists.
        #expect(result.stdoutLines == ["0", "1", "2", "3"])
    }

    @Test("/dev holds only the minimal nodes", rootOnly)
    func minimalDev() throws {
        let result = try run(shell("ls -A /dev; echo x > /dev/null && echo null-ok"))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            result.stdoutLines == [
                "fd", "full", "null", "random", "shm", "stderr", "stdin", "stdout", "tty",
                "urandom", "zero", "null-ok",
            ])
    }
}
