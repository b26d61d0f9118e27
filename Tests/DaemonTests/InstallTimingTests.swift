import AppdAPI
import AppdClient
import Foundation
import Testing

/// `POST /v1/apps` answers how long each stage of the install took (scripts/bench-install
/// prints them): the names are checked, never the durations.
@Suite("an install through the daemon answers its stages in Server-Timing", .serialized, rootOnly)
struct InstallTimingTests {
    @Test("every stage of an install is named in the answer's Server-Timing, with a duration")
    func stagesNamed() throws {
        let daemon = try TestDaemon()
        let bundle = try daemon.makeProbe("com.example.timed")
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
        let tar = "\(daemon.directory)/timed.tar"
        let made = try TestDaemon.run("/usr/bin/tar", ["-C", bundle, "-cf", tar, "."])
        #expect(made.code == 0, "\(made.output)")

        let response = try daemon.client.send(
            "POST", AppdClient.path("apps", query: ["name": "Probe.app"]),
            body: try Data(contentsOf: URL(fileURLWithPath: tar)),
            contentType: "application/x-tar")
        #expect(response.status == 201, "\(String(decoding: response.body, as: UTF8.self))")
        let entries = response.head.values("Server-Timing")
        var durations: [String: Double] = [:]
        for entry in entries {
            let parts = entry.split(separator: ";", maxSplits: 1)
            guard parts.count == 2, parts[1].hasPrefix("dur=") else {
                Issue.record("'\(entry)' is not name;dur=MILLISECONDS")
                continue
            }
            durations[String(parts[0])] = Double(parts[1].dropFirst(4))
        }
        let stages = [
            "receive", "lock", "check", "stage", "verify", "sync", "publish", "commit", "cleanup",
            "record",
        ]
        #expect(entries.map { String($0.prefix { $0 != ";" }) } == stages)
        for stage in stages {
            let duration = try #require(durations[stage], "no duration for \(stage) in \(entries)")
            #expect(duration >= 0, "\(stage): \(duration)")
        }
        #expect(try daemon.client.get("/v1/apps/com.example.timed", as: APIApp.self).version == "1")
    }
}
