import AppBundle
import Foundation
import Sandbox
import Testing

@testable import AppContainers
@testable import AppdConfig

/// The state root's profile (what `appd profile`, `appd run` and the daemon's launches use) is
/// the library's compile of the same inputs: AppStore only gathers them.
@Suite("AppStore's profile is SandboxPolicy.compile of its inputs", .serialized, rootOnly)
struct ProfileAdapterTests {
    @Test(
        "an installed app with an [App ID] override: the same profile from the library, given the inputs by hand"
    )
    func sameProfile() throws {
        let scratch = Scratch()
        let config = try AppdConfiguration.parse(
            """
            [Signing]
            AllowUnsigned=yes
            [Sandbox]
            MemoryMax=256M
            [App com.example.net]
            MemoryMax=64M
            CPUWeight=50
            RevokeEntitlements=com.apple.security.network.server
            Environment=PORT=7000
            """, file: "test.conf")
        let store = try store(scratch.sub("root"), config: config)
        try makeBundle(
            at: scratch.sub("src/Net.app"), id: "com.example.net", executable: "Net",
            entitlements: [
                "com.apple.security.app-sandbox": true,
                "com.apple.security.network.client": true,
                "com.apple.security.network.server": true,
            ])
        let app = try store.install(bundleAt: scratch.sub("src/Net.app")).app
        let kernel = KernelLayers(landlockABI: 7, seccomp: true)
        let fromStore = try store.sandboxProfile(for: app, arguments: ["-v"], kernel: kernel)

        // The inputs a runtime without a state root would have: the bundle it read, the
        // containers and uid it chose, the settings it was given.
        let installed = try #require(app.bundlePath(in: store.root))
        var settings = SandboxSettings()
        settings.memoryMax = 64 << 20
        let override = SandboxOverride(
            revokedEntitlements: ["com.apple.security.network.server"], cpuWeight: 50,
            environment: [.init(name: "PORT", value: "7000")],
            summary:
                "MemoryMax=64M, CPUWeight=50, Environment=PORT=7000, revoked com.apple.security.network.server"
        )
        let subject = SandboxSubject(
            bundle: try AppBundle.open(at: installed),
            dataContainer: app.dataContainer(in: store.root),
            uid: app.uid, gid: app.gid)
        let fromLibrary = try SandboxPolicy.compile(
            subject, settings: settings, override: override, kernel: kernel, arguments: ["-v"])

        #expect(fromStore == fromLibrary)
        // And the override did something, so the equality is not of two baselines.
        #expect(
            fromStore.cgroupLimits == CgroupLimits(memoryMax: 64 << 20, pidsMax: 512, cpuWeight: 50)
        )
        #expect(fromStore.denyPortBinds)
        #expect(fromStore.environment.last == .init(name: "PORT", value: "7000"))
    }
}
