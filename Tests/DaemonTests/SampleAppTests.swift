import AppdAPI
import AppdClient
import Foundation
import Testing

/// The AppRuntime samples (Examples/Notes, Examples/Player) under a real daemon: the library's
/// end of the lifecycle channel against the daemon's, in the sandbox, signed like any app.
@Suite("the AppRuntime samples under appd", .serialized, rootOnly)
struct SampleAppTests {
    @Test(
        "Notes saves on didEnterBackground and willTerminate and restores on relaunch and after an upgrade; its Preferences count launches across both"
    )
    func notes() throws {
        let daemon = try TestDaemon(config: lifecycleConfig())
        try daemon.installSample("Notes")
        let first = try daemon.launch("com.example.notes", ["-note", "first note"])
        #expect(try daemon.eventually { try daemon.logs(first.id).contains("notes: active") })
        #expect(try daemon.logs(first.id).contains("notes: attached to appd: yes"))
        #expect(
            try daemon.logs(first.id).contains(#"notes: launch 1, added "first note" (1 notes)"#))

        // To the background: it saves inside a background task, then is frozen.
        try daemon.act("background", first.id)
        #expect(
            try daemon.eventually {
                try daemon.logs(first.id).contains("notes: saved 1 notes (didEnterBackground)")
            })
        #expect(try daemon.eventually { try daemon.state(first.id) == .suspended })
        // Terminated while frozen: thawed, told, saves again, exits on its own.
        _ = try daemon.client.post(
            "/v1/instances/\(first.id)/terminate", body: TerminateRequest(grace: 5),
            as: APIInstance.self)
        let ended = try daemon.wait(first.id)
        #expect(
            ended.exit?.reason == .terminated && ended.exit?.code == 0,
            "\(String(describing: ended.exit))")
        #expect(try daemon.logs(first.id).contains("notes: saved 1 notes (willTerminate)"))

        // Relaunched: the notes and the launch count come back.
        let second = try daemon.launch("com.example.notes", [])
        #expect(try daemon.eventually { try daemon.logs(second.id).contains("notes: active") })
        let secondLog = try daemon.logs(second.id)
        #expect(secondLog.contains("notes: restored 1 notes"), "\(secondLog)")
        #expect(
            secondLog.contains(#"notes: launch 2, added "note from launch 2" (2 notes)"#),
            "\(secondLog)")
        _ = try daemon.client.post(
            "/v1/instances/\(second.id)/terminate", body: TerminateRequest(grace: 5),
            as: APIInstance.self)
        _ = try daemon.wait(second.id)

        // Upgraded (a new bundle container, the same data container): still there.
        try daemon.installSample("Notes", version: "2")
        let third = try daemon.launch("com.example.notes", [])
        #expect(try daemon.eventually { try daemon.logs(third.id).contains("notes: active") })
        let thirdLog = try daemon.logs(third.id)
        #expect(thirdLog.contains("notes: restored 2 notes"), "\(thirdLog)")
        #expect(thirdLog.contains("notes: launch 3, added"), "\(thirdLog)")
        _ = try daemon.client.post(
            "/v1/instances/\(third.id)/terminate", body: TerminateRequest(grace: 5),
            as: APIInstance.self)
        _ = try daemon.wait(third.id)
    }

    @Test(
        "Player declares UIBackgroundModes audio: allowed, it keeps ticking in the background; comes back when activated; stops on terminate"
    )
    func playerInTheBackground() throws {
        let daemon = try TestDaemon(config: lifecycleConfig())
        try daemon.installSample("Player")
        let player = try daemon.launch("com.example.player", ["-TickInterval", "0.1"])
        #expect(try daemon.eventually { try daemon.logs(player.id).contains("player: active") })
        try daemon.act("background", player.id)
        #expect(
            try daemon.eventually {
                try daemon.logs(player.id).contains("player: in the background, still playing")
            })
        // Well past the grace period (0.5 s): not frozen, and ticking.
        usleep(1_500_000)
        #expect(try daemon.state(player.id) == .background)
        // Three ticks come in 0.3 s on an idle machine, later on a loaded one.
        let before = try daemon.ticks(player.id, state: "background")
        #expect(
            try daemon.eventually { try daemon.ticks(player.id, state: "background") >= before + 3 }
        )
        #expect(try daemon.state(player.id) == .background)

        try daemon.act("activate", player.id)
        #expect(
            try daemon.eventually {
                try daemon.logs(player.id).contains("player: back in the foreground")
            })
        #expect(try daemon.eventually { try daemon.ticks(player.id, state: "active") > 0 })
        _ = try daemon.client.post(
            "/v1/instances/\(player.id)/terminate", body: TerminateRequest(grace: 5),
            as: APIInstance.self)
        let ended = try daemon.wait(player.id)
        #expect(
            ended.exit?.reason == .terminated && ended.exit?.code == 0,
            "\(String(describing: ended.exit))")
        #expect(try daemon.logs(player.id).contains("player: stopped after"))
    }

    @Test(
        "Player where the admin allows no background mode: frozen after the grace period like any app, no tick while frozen"
    )
    func playerRefusedBackgroundMode() throws {
        let daemon = try TestDaemon(config: lifecycleConfig("AllowedBackgroundModes=\n"))
        try daemon.installSample("Player")
        let player = try daemon.launch("com.example.player", ["-TickInterval", "0.1"])
        #expect(try daemon.eventually { try daemon.logs(player.id).contains("player: active") })
        try daemon.act("background", player.id)
        #expect(try daemon.eventually { try daemon.state(player.id) == .suspended })
        let frozenAt = try daemon.ticks(player.id, state: "background")
        usleep(1_000_000)
        #expect(try daemon.ticks(player.id, state: "background") == frozenAt)
        #expect(try daemon.state(player.id) == .suspended)
    }
}

extension TestDaemon {
    /// Builds `<name>.app` from the built sample executable and every file of `Examples/<name>`
    /// but its sources and README (as scripts/build-sample does), with CFBundleVersion
    /// `version`, signs it with the daemon's trusted key and installs it through the daemon.
    func installSample(_ name: String, version: String = "1") throws {
        let bundle = "\(directory)/src-\(name)-\(version)/\(name).app"
        try assembleSample(name, version: version, into: bundle)
        try Self.tool(["sign", "--key", signingKey, bundle])
        let result = try run("appd", ["install", bundle])
        guard result.code == 0 else {
            throw DaemonFailure("appd install \(name) \(version) failed: \(result.output)")
        }
    }

    /// `<name>.app` at `bundle`, unsigned, as scripts/build-sample assembles it.
    func assembleSample(_ name: String, version: String = "1", into bundle: String) throws {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
                "Examples/\(name)"
            ).path
        let files = FileManager.default
        try? files.removeItem(atPath: bundle)
        try files.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try files.copyItem(atPath: builtExecutable(name), toPath: "\(bundle)/\(name)")
        for item in try files.contentsOfDirectory(atPath: source)
        where !item.hasSuffix(".swift") && !item.hasPrefix("README") {
            try files.copyItem(atPath: "\(source)/\(item)", toPath: "\(bundle)/\(item)")
        }
        let info = try String(contentsOfFile: "\(bundle)/Info.plist", encoding: .utf8)
            .replacingOccurrences(
                of: "<key>CFBundleVersion</key>\n\t<string>1</string>",
                with: "<key>CFBundleVersion</key>\n\t<string>\(version)</string>")
        guard info.contains("<string>\(version)</string>") else {
            throw DaemonFailure("could not set CFBundleVersion \(version) in \(name)'s Info.plist")
        }
        try info.write(toFile: "\(bundle)/Info.plist", atomically: true, encoding: .utf8)
    }

    /// How many `player: tick N state=STATE` lines the instance printed.
    func ticks(_ iid: String, state: String) throws -> Int {
        try logs(iid).split(separator: "\n").filter {
            $0.hasPrefix("player: tick ") && $0.hasSuffix("state=\(state)")
        }.count
    }
}
