import AppdAPI
import AppdClient
import Foundation
import Testing

/// One daemon per state root, and how clients of `--root` find it (issue 25, points 2 and 5).
@Suite("one daemon per state root, found through its root", .serialized, rootOnly)
struct StateRootDaemonTests {
    /// `appd serve` on `root` as the second daemon; killed if it is still running after
    /// `seconds` (without the lock it would serve until then).
    func secondServe(root: String, config: String, seconds: Double = 15) throws -> (
        code: Int32?, output: String
    ) {
        let process = try ChildProcess(
            "appd",
            ["serve", "--root", root, "--config", config, "--socket", "\(root)/second.sock"],
            environment: ["PATH": "/usr/bin:/bin"])
        let deadline = Date(timeIntervalSinceNow: seconds)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        let stillRunning = process.isRunning
        if stillRunning { process.signal(SIGTERM) }
        let result = process.finish()
        return (stillRunning ? nil : result.code, result.stdout)
    }

    @Test(
        "a second appd serve on the same root, by its path or through a symlink, exits naming the pid that holds it"
    )
    func secondDaemonRefused() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.held")
        let running = try daemon.launch("com.example.held", ["sleep", "60"])
        let pid = try #require(daemon.daemon.pid)
        let link = "\(daemon.directory)/root-link"
        #expect(symlink(daemon.root, link) == 0)
        for root in [daemon.root, link] {
            let second = try secondServe(root: root, config: daemon.configPath)
            #expect(second.code == 1, "the second daemon kept serving: \(second.output)")
            #expect(
                second.output.contains(
                    "appd serve pid \(pid) is already serving the state root \(root)"),
                "\(second.output)")
        }
        // The first one is untouched: it still serves, and its instance is still its own.
        #expect(try daemon.instance(running.id).state != .exited)
        #expect(
            try daemon.client.get("/v1/instances", as: [APIInstance].self).map(\.id) == [running.id]
        )
        // Its lock goes with it: a crashed daemon does not keep the root from the next one.
        daemon.crash()
        try daemon.start()
        #expect(try daemon.instance(running.id).state != .exited)
    }

    @Test(
        "--root finds a daemon serving a custom --socket through the path it recorded; the hint says where a path came from"
    )
    func customSocketFoundThroughRoot() throws {
        let daemon = try TestDaemon(socketName: "custom.sock")
        let record = "\(daemon.root)/run/appd.socket-path"
        #expect((try? String(contentsOfFile: record, encoding: .utf8)) == daemon.socket + "\n")
        let environment = ["PATH": "/usr/bin:/bin"]
        let ps = try TestDaemon.run(
            "appctl", ["--root", daemon.root, "ps"], environment: environment)
        #expect(ps.code == 0, "\(ps.output)")
        let viaEnvironment = try TestDaemon.run(
            "appctl", ["version"],
            environment: environment.merging(["APPD_ROOT": daemon.root]) { $1 })
        #expect(viaEnvironment.code == 0, "\(viaEnvironment.output)")
        // appctl status (version) names the daemon's config file.
        #expect(
            viaEnvironment.output.split(separator: "\n").contains {
                $0.hasPrefix("config ") && $0.hasSuffix(" \(daemon.configPath)")
            },
            "\(viaEnvironment.output)")

        // A wrong APPD_SOCKET is named as the cause, not only a daemon that is down.
        let wrong = try TestDaemon.run(
            "appctl", ["--root", daemon.root, "ps"],
            environment: environment.merging(["APPD_SOCKET": "\(daemon.directory)/nothing.sock"]) {
                $1
            })
        #expect(wrong.code == 1)
        #expect(
            wrong.output.contains(
                "the path is APPD_SOCKET's: if that daemon is gone, unset APPD_SOCKET"),
            "\(wrong.output)")

        // A daemon that crashed leaves its record: the hint says the recorded daemon is gone.
        daemon.crash()
        let crashed = try TestDaemon.run(
            "appctl", ["--root", daemon.root, "ps"], environment: environment)
        #expect(crashed.code == 1)
        #expect(
            crashed.output.contains(
                "the path is the one the daemon of \(daemon.root) (from --root) recorded in \(record) when it started: it is not running any more"
            ),
            "\(crashed.output)")
        // A clean stop removes it.
        try daemon.start()
        daemon.stop()
        #expect(!FileManager.default.fileExists(atPath: record))
        let stopped = try TestDaemon.run(
            "appctl", ["--root", daemon.root, "ps"], environment: environment)
        #expect(
            stopped.output.contains("no daemon listening on \(daemon.root)/run/appd.sock"),
            "\(stopped.output)")
        #expect(
            stopped.output.contains("no daemon of it recorded another in \(record)"),
            "\(stopped.output)")
    }
}
