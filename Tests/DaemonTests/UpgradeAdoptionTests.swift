import AppdAPI
import AppdClient
import Foundation
import Testing

/// An upgrade keeps the running instances: the daemon before the versioned instance record
/// wrote `{"instance": <API instance>, "pidStartTime": …, "bundle": …}` (version 1,
/// Tests/Fixtures/instance-records); a daemon of today reads it, re-adopts the launcher and
/// controls it as its own.
@Suite(
    "upgrading the daemon: the previous version's instance records are re-adopted", .serialized,
    rootOnly)
struct UpgradeAdoptionTests {
    @Test(
        "a running instance whose record is in the version 1 format is adopted, terminated, and its record rewritten as version 2"
    )
    func adoptsVersion1Record() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.upgrade")
        let launched = try daemon.launch("com.example.upgrade", ["sleep", "120"])
        let before = try daemon.instance(launched.id)
        daemon.stop()
        let pid = try #require(before.pid)
        #expect(kill(pid, 0) == 0, "a clean stop leaves the app running")

        // The record as the previous daemon would have left it: its own fields beside the API's
        // instance (as that daemon's record held it: no denial counts).
        let path =
            APISocket.runtimeDirectory(stateRoot: daemon.root) + "/instances/\(launched.id).json"
        let current = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path)))
                as? [String: Any])
        #expect(current["version"] as? Int == 2, "this daemon writes version 2")
        var instance = before
        instance.denials = nil
        instance.denialsDropped = nil
        let encoded = try #require(
            try JSONSerialization.jsonObject(with: APICoding.encoder().encode(instance))
                as? [String: Any])
        var old: [String: Any] = ["instance": encoded]
        old["pidStartTime"] = current["pidStartTime"]
        old["bundle"] = current["bundle"]
        let text = try JSONSerialization.data(withJSONObject: old, options: [.sortedKeys])
        try text.write(to: URL(fileURLWithPath: path))
        let written = try #require(try JSONSerialization.jsonObject(with: text) as? [String: Any])
        #expect(
            Set(written.keys) == ["instance", "pidStartTime", "bundle"], "no version: version 1")

        try daemon.start()
        let adopted = try daemon.instance(launched.id)
        #expect(adopted.pid == pid)
        #expect(adopted.state == before.state, "\(daemon.serveLog)")
        #expect(adopted.cgroup == before.cgroup)
        // The API's dates carry milliseconds, and formatting a parsed one may truncate it a
        // millisecond down: this test formats it once (the record), the daemon once (its answer).
        #expect(abs(adopted.startedAt.timeIntervalSince(before.startedAt)) <= 0.002)
        _ = try daemon.client.post(
            "/v1/instances/\(launched.id)/terminate", body: TerminateRequest(grace: 5),
            as: APIInstance.self)
        #expect(try daemon.wait(launched.id).exit == APIExit(reason: .terminated, signal: SIGTERM))
        let rewritten = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path)))
                as? [String: Any])
        #expect(rewritten["version"] as? Int == 2)
        #expect(rewritten["instance"] == nil)
    }
}
