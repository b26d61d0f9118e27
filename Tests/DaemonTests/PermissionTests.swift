import AppdAPI
import AppdClient
import Foundation
import Testing

@Suite("who may do what comes from the kernel's word on the caller", .serialized, rootOnly)
struct PermissionTests {
    /// Runs a built tool as `nobody` (uid and gid 65534, no supplementary groups).
    func asNobody(_ daemon: TestDaemon, _ tool: String, _ arguments: [String]) throws -> (
        code: Int32, output: String
    ) {
        try daemon.run(
            "/usr/bin/setpriv",
            [
                "--reuid=65534", "--regid=65534", "--clear-groups", builtExecutable(tool),
                "--socket", daemon.socket,
            ] + arguments)
    }

    @Test(
        "the default policy: anyone who can connect may list; launching and installing are refused with 403 naming the setting"
    )
    func defaultPolicy() throws {
        let daemon = try TestDaemon(config: "[API]\nSocketMode=0666\n")
        try daemon.installProbe("com.example.guarded")
        let list = try asNobody(daemon, "appctl", ["list"])
        #expect(list.code == 0)
        #expect(list.output.contains("com.example.guarded"))

        let launch = try asNobody(daemon, "appctl", ["launch", "com.example.guarded"])
        #expect(launch.code == 1)
        #expect(launch.output.contains("uid 65534 may not launch or control apps"))
        #expect(launch.output.contains("ControlAllowed=@appd"))
        #expect(try daemon.client.get("/v1/instances?all=1", as: [APIInstance].self).isEmpty)

        let uninstall = try asNobody(daemon, "appd", ["uninstall", "com.example.guarded"])
        #expect(uninstall.code == 1)
        #expect(uninstall.output.contains("may not install or uninstall apps"))
        #expect(try daemon.client.get("/v1/apps", as: [APIApp].self).count == 1)
    }

    @Test(
        "a user named in ControlAllowed may launch, and the instance records who launched it; admin rights stay root's"
    )
    func namedUser() throws {
        let daemon = try TestDaemon(config: "[API]\nSocketMode=0666\nControlAllowed=nobody\n")
        try daemon.installProbe("com.example.shared")
        let launch = try asNobody(
            daemon, "appctl", ["launch", "--wait", "com.example.shared", "--", "exit", "5"])
        #expect(launch.code == 5)
        let instances = try daemon.client.get("/v1/instances?all=1", as: [APIInstance].self)
        #expect(instances.map(\.launchedBy) == [65534])
        let version = try asNobody(daemon, "appctl", ["--json", "version"])
        #expect(version.output.contains("\"control\""))
        #expect(!version.output.contains("\"admin\""))
    }

    @Test("a socket left at its default mode 0660 root:root keeps other users out entirely")
    func socketMode() throws {
        let daemon = try TestDaemon()
        var info = stat()
        #expect(stat(daemon.socket, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o660)
        let list = try asNobody(daemon, "appctl", ["list"])
        #expect(list.code == 1)
        #expect(list.output.lowercased().contains("permission denied"))
        // root's group would give far more than the socket: the hint names the setting instead.
        #expect(list.output.contains("only root may connect"), "\(list.output)")
        #expect(list.output.contains("SocketGroup="))
        #expect(!list.output.contains("usermod -aG root"))
    }
}
