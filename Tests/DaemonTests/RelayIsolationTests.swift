import AppdAPI
import Foundation
import Testing

/// The output relay waits on nothing the app can hold and is not frozen with it (issue 24
/// item 6, docs/app-output.md): each attack from a real sandboxed Probe against a real daemon,
/// read back with `appctl logs`, which waits at most 1 s for the relay (InstanceLogs.settle).
@Suite("output relay isolation", .serialized, rootOnly)
struct RelayIsolationTests {
    /// `appctl logs IID`: its output and how long it took.
    static func timedLogs(_ daemon: TestDaemon, _ iid: String) throws -> (
        text: String, seconds: Double
    ) {
        let start = Date()
        let result = try daemon.run("appctl", ["logs", iid])
        #expect(result.code == 0, "appctl logs: \(result.output)")
        return (result.output, Date().timeIntervalSince(start))
    }

    static func home(_ daemon: TestDaemon, _ id: String) throws -> String {
        try daemon.dataContainer(id)
    }

    @Test(
        "attack: an app holding flock(LOCK_EX) on its stdout still has each line in appctl logs, within the 1 s bound"
    )
    func flockedStdout() throws {
        let daemon = try TestDaemon()
        let id = "com.example.flocked"
        try daemon.installProbe(id)
        let home = try Self.home(daemon, id)
        // 30 lines 100 ms apart: the app holds its lock for 3 s, well past the 1 s bound of each
        // of the first 5 requests (an app that ended would have let go of it).
        let instance = try daemon.launch(id, ["output-flocked", "30"])
        var slowest = 0.0
        for index in 0..<5 {
            // The app makes marker-N right after it wrote line N: ask for the log at once.
            #expect(
                try daemon.eventually { access("\(home)/marker-\(index)", F_OK) == 0 },
                "marker \(index) never came")
            let (text, seconds) = try Self.timedLogs(daemon, instance.id)
            slowest = max(slowest, seconds)
            #expect(
                text.contains("flock-stdout: allowed\n"), "the app did not get its lock:\n\(text)")
            #expect(
                text.contains("locked line \(index)\n"),
                "line \(index) missing while the app holds its lock:\n\(text)")
            #expect(seconds < 1, "appctl logs took \(seconds) s (the settle bound is 1 s)")
        }
        print("flocked stdout: slowest appctl logs \(String(format: "%.3f", slowest)) s")
        _ = try daemon.wait(instance.id)
    }

    @Test("a suspended app's last line is in appctl logs while it is frozen, within the 1 s bound")
    func suspendedOutput() throws {
        let daemon = try TestDaemon(config: lifecycleConfig())
        let id = "com.example.lastwords"
        try daemon.installProbe(id)
        let home = try Self.home(daemon, id)
        let instance = try daemon.launch(id, ["output-on-cue"])
        let launcher = try #require(instance.pid)
        var relay: pid_t?
        #expect(
            try daemon.eventually {
                relay = outputRelay(launcher: launcher)
                return relay != nil
            })
        let relayPID = try #require(relay)
        // The relay is held back (as a loaded machine may) so that the line is still in the pipe
        // when the freeze comes; it is let go once the app is frozen. Frozen with the app, it
        // would stay stopped, and the line out of the log, until a resume.
        kill(relayPID, SIGSTOP)
        defer { kill(relayPID, SIGCONT) }
        #expect(FileManager.default.createFile(atPath: "\(home)/cue", contents: nil))
        #expect(
            try daemon.eventually { access("\(home)/said", F_OK) == 0 },
            "the app never wrote its line")
        #expect(try daemon.act("suspend", instance.id).state == .suspended)
        kill(relayPID, SIGCONT)
        let (text, seconds) = try Self.timedLogs(daemon, instance.id)
        print("suspended app: appctl logs \(String(format: "%.3f", seconds)) s")
        #expect(
            text.contains("last words\n"), "the line written before the freeze is missing:\n\(text)"
        )
        #expect(seconds < 1, "appctl logs took \(seconds) s (the settle bound is 1 s)")
        #expect(try daemon.state(instance.id) == .suspended, "the app was thawed meanwhile")
        _ = try daemon.client.post("/v1/instances/\(instance.id)/kill", as: APIInstance.self)
    }
}
