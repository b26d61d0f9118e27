import AppdAPI
import Foundation
import Testing

/// `appctl --host ssh://...` against a real daemon through a real sshd: a private one on a free
/// port of 127.0.0.1 with its own host key, and a test user of its own whose key it accepts.
@Suite("appctl --host: the daemon of another machine through ssh", .serialized, rootOnly)
struct RemoteTests {
    /// A daemon any local user may reach, with the Probe installed as com.example.remote, a
    /// private sshd, and the `ssh://` URL of that daemon's socket through it.
    static func remoteDaemon() throws -> (TestDaemon, PrivateSSH, String) {
        let daemon = try TestDaemon(config: "[API]\nSocketMode=0666\n")
        try daemon.installProbe("com.example.remote")
        let ssh = try PrivateSSH()
        return (daemon, ssh, "ssh://\(ssh.user)@127.0.0.1:\(ssh.port)\(daemon.socket)")
    }

    @Test(
        "through ssh appctl gets the remote user's answers: it may list, and launching is refused as for that uid"
    )
    func remoteUserRights() throws {
        let (daemon, ssh, url) = try Self.remoteDaemon()

        let list = try ssh.appctl(["--host", url, "list"])
        #expect(list.code == 0 && list.output.contains("com.example.remote"), "\(list.output)")
        // The daemon saw the remote user, not root who runs this test.
        let status = try ssh.appctl(["--host", url, "--json", "version"])
        let uid = try #require(ssh.uid)
        #expect(status.output.contains("\"uid\" : \(uid)"), "\(status.output)")
        let launch = try ssh.appctl(["--host", url, "launch", "com.example.remote"])
        #expect(
            launch.code == 1 && launch.output.contains("uid \(uid) may not launch or control apps"),
            "\(launch.output)")
        #expect(try daemon.client.get("/v1/instances?all=1", as: [APIInstance].self).isEmpty)

        // APPD_HOST says the same as --host; an info of an app streams through unchanged.
        let info = try ssh.appctl(["info", "com.example.remote"], environment: ["APPD_HOST": url])
        #expect(info.code == 0 && info.output.contains("com.example.remote"), "\(info.output)")
    }

    @Test(
        "launch --console through ssh: the attached launch streams the remote app's output and appctl exits with its code"
    )
    func remoteConsole() throws {
        let (daemon, ssh, url) = try Self.remoteDaemon()
        // The remote user may launch.
        let handle = try #require(FileHandle(forWritingAtPath: daemon.configPath))
        handle.seekToEndOfFile()
        handle.write(Data("\n[API]\nControlAllowed=\(ssh.user)\n".utf8))
        try handle.close()
        let reloaded = try daemon.run("appd", ["reload"])
        #expect(reloaded.code == 0, "\(reloaded.output)")

        let console = try ssh.appctl([
            "--host", url, "launch", "--console", "com.example.remote", "--", "env",
        ])
        #expect(
            console.code == 0 && console.output.contains("env: value HOME="), "\(console.output)")
        let exits = try ssh.appctl([
            "--host", url, "launch", "--console", "com.example.remote", "--", "exit", "6",
        ])
        #expect(exits.code == 6, "\(exits.output)")
        let ended = try daemon.client.get("/v1/instances?all=1", as: [APIInstance].self)
        #expect(ended.count == 2 && ended.allSatisfy { $0.state == .exited }, "\(ended)")
        #expect(ended.allSatisfy { $0.launchedBy == ssh.uid }, "\(ended)")
    }

    @Test(
        "each failure is named: ssh missing, host unreachable, remote appctl missing, remote socket missing, a malformed URL"
    )
    func failuresAreNamed() throws {
        let daemon = try TestDaemon(config: "[API]\nSocketMode=0666\n")
        let ssh = try PrivateSSH()
        let url = "ssh://\(ssh.user)@127.0.0.1:\(ssh.port)\(daemon.socket)"

        let noSSH = try ssh.appctl(["--host", url, "list"], environment: ["PATH": "/nonexistent"])
        #expect(noSSH.code == 1 && noSSH.output.contains("ssh not found"), "\(noSSH.output)")

        let closedPort = try PrivateSSH.freePort()
        let unreachable = try ssh.appctl([
            "--host", "ssh://\(ssh.user)@127.0.0.1:\(closedPort)", "list",
        ])
        #expect(
            unreachable.code == 1 && unreachable.output.contains("cannot reach 127.0.0.1 over ssh"),
            "\(unreachable.output)")

        let noAppctl = try ssh.appctl(
            ["--host", url, "list"], environment: ["APPD_REMOTE_APPCTL": "/nonexistent/appctl"])
        #expect(
            noAppctl.code == 1 && noAppctl.output.contains("appctl is not installed on 127.0.0.1"),
            "\(noAppctl.output)")

        let noSocket = try ssh.appctl(
            ["--host", "ssh://\(ssh.user)@127.0.0.1:\(ssh.port)/nonexistent/appd.sock", "list"])
        #expect(
            noSocket.code == 1 && noSocket.output.contains("appctl could not reach appd")
                && noSocket.output.contains("appd is not running"), "\(noSocket.output)")

        for bad in ["http://host", "ssh://-oProxyCommand=x", "ssh://host:99999", "ssh://host/a b"] {
            let result = try ssh.appctl(["--host", bad, "list"])
            #expect(
                result.code == 1 && result.output.contains("--host"), "\(bad): \(result.output)")
        }
    }
}

/// An sshd of the test's own on 127.0.0.1 and a user (with a shell) whose key it accepts;
/// appctl runs as that user, so ssh uses that user's ~/.ssh. Removed on deinit.
final class PrivateSSH {
    let directory: String
    let user: String
    let port: Int
    /// sshd's pid (from its PidFile): it runs daemonized, not as a child of the tests, whose
    /// Foundation `Process` bookkeeping otherwise blocked in wait4 on the long-lived child and
    /// never saw the tools' exits.
    private let server: pid_t
    private let madePrivsepDirectory: Bool
    var home: String { "\(directory)/home" }
    var uid: UInt32? { getpwnam(user).map { $0.pointee.pw_uid } }

    init() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/sshd") else {
            throw DaemonFailure(
                "/usr/sbin/sshd is missing: scripts/bootstrap installs openssh-server")
        }
        directory = try makeTemporaryDirectory("/var/tmp/appd-ssh-test.XXXXXX")
        chmod(directory, 0o755)
        user = "appdssh\(getpid() % 100_000)"
        port = try Self.freePort()
        madePrivsepDirectory = mkdir("/run/sshd", 0o755) == 0
        let home = "\(directory)/home"
        let (directory, user, port) = (directory, user, port)
        var started: pid_t?
        do {
            // "*": no password, yet not locked ("!"), which sshd refuses without PAM.
            try Self.check(
                "/usr/sbin/useradd",
                ["-M", "-p", "*", "-d", "\(directory)/home", "-s", "/bin/sh", user])
            try FileManager.default.createDirectory(
                atPath: "\(home)/.ssh", withIntermediateDirectories: true)
            try Self.check(
                "/usr/bin/ssh-keygen",
                ["-q", "-t", "ed25519", "-N", "", "-f", "\(directory)/host_key"])
            try Self.check(
                "/usr/bin/ssh-keygen",
                ["-q", "-t", "ed25519", "-N", "", "-f", "\(home)/.ssh/id_ed25519"])
            try FileManager.default.copyItem(
                atPath: "\(home)/.ssh/id_ed25519.pub", toPath: "\(home)/.ssh/authorized_keys")
            try """
            Host 127.0.0.1
                StrictHostKeyChecking no
                UserKnownHostsFile \(home)/.ssh/known_hosts
                BatchMode yes
                LogLevel ERROR
            """.write(toFile: "\(home)/.ssh/config", atomically: false, encoding: .utf8)
            try Self.check("/bin/chown", ["-R", "\(user):\(user)", home])
            try Self.check("/bin/chmod", ["-R", "go-rwx", "\(home)/.ssh"])
            try """
            Port \(port)
            ListenAddress 127.0.0.1
            HostKey \(directory)/host_key
            PidFile \(directory)/sshd.pid
            AuthorizedKeysFile \(home)/.ssh/authorized_keys
            PasswordAuthentication no
            KbdInteractiveAuthentication no
            UsePAM no
            StrictModes no
            AllowUsers \(user)
            """.write(toFile: "\(directory)/sshd_config", atomically: false, encoding: .utf8)
            try Self.check(
                "/usr/sbin/sshd", ["-f", "\(directory)/sshd_config", "-E", "\(directory)/sshd.log"])
            // Daemonized: listening once its pid file is there and a connection is accepted.
            var ready = false
            for _ in 0..<100 where !ready {
                if started == nil {
                    started =
                        (try? String(contentsOfFile: "\(directory)/sshd.pid", encoding: .utf8))
                        .flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
                }
                ready = started != nil && Self.accepts(port)
                if !ready { usleep(50_000) }
            }
            guard ready, let pid = started else {
                throw DaemonFailure("sshd did not listen on 127.0.0.1:\(port)")
            }
            server = pid
        } catch {
            if let started { Self.stop(started) }
            Self.cleanUp(user: user, directory: directory, privsep: madePrivsepDirectory)
            throw error
        }
    }

    deinit {
        Self.stop(server)
        Self.cleanUp(user: user, directory: directory, privsep: madePrivsepDirectory)
    }

    /// SIGTERM to the listener (its connections' processes end with their sessions), then
    /// waits until it is gone.
    private static func stop(_ pid: pid_t) {
        kill(pid, SIGTERM)
        for _ in 0..<100 where kill(pid, 0) == 0 { usleep(20_000) }
        if kill(pid, 0) == 0 { kill(pid, SIGKILL) }
    }

    private static func cleanUp(user: String, directory: String, privsep: Bool) {
        _ = try? runTool("/usr/sbin/userdel", [user])
        try? FileManager.default.removeItem(atPath: directory)
        if privsep { rmdir("/run/sshd") }
    }

    /// Runs the built appctl as the test user (so ssh reads that user's ~/.ssh), with the built
    /// appctl as the remote one.
    func appctl(_ arguments: [String], environment: [String: String] = [:]) throws -> (
        code: Int32, output: String
    ) {
        var variables = [
            "HOME": home, "PATH": "/usr/bin:/bin", "APPD_REMOTE_APPCTL": builtExecutable("appctl"),
        ]
        variables.merge(environment) { $1 }
        return try runTool(
            "/usr/bin/setpriv",
            ["--reuid=\(user)", "--regid=\(user)", "--init-groups", builtExecutable("appctl")]
                + arguments,
            environment: variables)
    }

    static func check(_ tool: String, _ arguments: [String]) throws {
        let result = try runTool(tool, arguments)
        guard result.code == 0 else {
            throw DaemonFailure("\(tool) \(arguments.joined(separator: " ")): \(result.output)")
        }
    }

    static func freePort() throws -> Int {
        let listener = try HostListener()
        return Int(listener.port)
    }

    static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        } == 0
    }
}
