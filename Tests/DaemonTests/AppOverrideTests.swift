import AppdAPI
import Foundation
import Testing

@Suite("[App ID]: the admin's per-app overrides", .serialized, rootOnly)
struct AppOverrideTests {
    static let networkClient = "<key>com.apple.security.network.client</key><true/>"

    @Test(
        "one app gets its own MemoryMax and loses network.client without re-signing; its neighbour keeps the host's"
    )
    func limitsAndRevokedEntitlement() throws {
        // A host service the admin lets network apps reach (the loopback guard refuses others).
        let listener = try HostListener()
        let daemon = try TestDaemon(
            config: """
                [Sandbox]
                MemoryMax=256M
                LoopbackPorts=\(listener.port)
                [App com.example.Narrowed]
                MemoryMax=64M
                RevokeEntitlements=com.apple.security.network.client
                """)
        try daemon.installProbe("com.example.narrowed", entitlements: Self.networkClient)
        try daemon.installProbe("com.example.neighbour", entitlements: Self.networkClient)

        // The limit: the override's for one, the host's for the other.
        let narrowed = try daemon.launch("com.example.narrowed", ["sleep", "60"])
        let neighbour = try daemon.launch("com.example.neighbour", ["sleep", "60"])
        #expect(daemon.eventually { ReloadTests.memoryLimit(of: narrowed.pid ?? 0) == 64 << 20 })
        #expect(daemon.eventually { ReloadTests.memoryLimit(of: neighbour.pid ?? 0) == 256 << 20 })

        // The entitlement: revoked, the app has a network of its own and cannot reach the host.
        let refused = try daemon.launch(
            "com.example.narrowed", ["connect", "127.0.0.1", "\(listener.port)"])
        _ = try daemon.wait(refused.id)
        let refusedLog = try daemon.logs(refused.id)
        #expect(refusedLog.contains("connect: refused"), "\(refusedLog)")
        let allowed = try daemon.launch(
            "com.example.neighbour", ["connect", "127.0.0.1", "\(listener.port)"])
        _ = try daemon.wait(allowed.id)
        let allowedLog = try daemon.logs(allowed.id)
        #expect(allowedLog.contains("connect: allowed"), "\(allowedLog)")

        // appd profile says what the admin changed.
        let profile = try daemon.run(
            "appd", ["--config", daemon.configPath, "profile", "com.example.narrowed"])
        #expect(
            profile.output.contains(
                "[App com.example.narrowed] in appd.conf: MemoryMax=64M, revoked com.apple.security.network.client"
            ), "\(profile.output)")
    }

    @Test("a broken [App] section is refused whole, naming the line")
    func brokenSection() throws {
        for (text, words) in [
            ("[App not a bundle id]\n", "does not name a bundle id"),
            ("[App com.example.x]\nMemoryMax=lots\n", "MemoryMax=lots is not"),
            (
                "[App com.example.x]\nLauncher=/bin/sh\n",
                "unknown key Launcher in [App com.example.x]"
            ),
            ("[App com.example.x]\nRevokeEntitlements=com.*.x\n", "is not a list of patterns"),
            ("[App com.example.x]\n[App COM.example.x]\n", "appears twice"),
        ] {
            let file = "/tmp/appd-override-\(getpid()).conf"
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            defer { unlink(file) }
            let result = try runTool(
                "appd", ["--config", file, "list", "--no-daemon", "--root", "/nonexistent"])
            #expect(
                result.code == 1 && result.output.contains(words)
                    && result.output.contains("\(file):"), "\(text): \(result.output)")
        }
    }
}
