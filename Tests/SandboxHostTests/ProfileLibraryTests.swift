import AppBundle
import Foundation
import Testing

@testable import AppdConfig
@testable import Sandbox

/// The profile compiled as a library: from a bundle the caller read itself, containers and a
/// uid it chose, settings and a kernel, with no state root, registry or daemon (this target
/// does not even link AppContainers). What `appd-oci` needs.
@Suite("the sandbox profile compiled as a library, without a state root")
struct ProfileLibraryTests {
    /// A minimal bundle at `<scratch>/bundles/Net.app` requesting the network-client and
    /// application-group entitlements.
    func bundle(_ scratch: Scratch) throws -> AppBundle {
        scratch.write(
            "bundles/Net.app/Info.plist",
            plist([
                ("CFBundleIdentifier", "<string>com.example.net</string>"),
                ("CFBundleExecutable", "<string>Net</string>"),
                ("CFBundleVersion", "<string>1</string>"),
                ("CFBundleName", "<string>Net Tool</string>"),
            ]))
        scratch.write(
            "bundles/Net.app/Entitlements.plist",
            plist([
                ("com.apple.security.app-sandbox", "<true/>"),
                ("com.apple.security.network.client", "<true/>"),
                (
                    "com.apple.security.application-groups",
                    "<array><string>group.example</string></array>"
                ),
            ]))
        scratch.write("bundles/Net.app/Net", "#!/bin/sh\n")
        chmod("\(scratch.path)/bundles/Net.app/Net", 0o755)
        return try AppBundle.open(at: "\(scratch.path)/bundles/Net.app")
    }

    func plist(_ entries: [(String, String)]) -> String {
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0"><dict>
        \(entries.map { "<key>\($0.0)</key>\($0.1)" }.joined(separator: "\n"))
        </dict></plist>
        """
    }

    let kernel = KernelLayers(landlockABI: 7, seccomp: true)

    @Test("a bundle's entitlements, its containers and uid, settings and a kernel give the profile")
    func fromBundle() throws {
        let scratch = Scratch()
        let bundle = try bundle(scratch)
        let data = "\(scratch.path)/data/D1"
        let group = SandboxSubject.GroupContainer(
            groupID: "group.example", path: "\(scratch.path)/groups/G1", gid: 4_000_000)
        var settings = SandboxSettings()
        settings.memoryMax = 64 << 20
        let subject = SandboxSubject(
            bundle: bundle, dataContainer: data, uid: 3_000_000, gid: 3_000_000,
            groupContainers: [group])
        #expect(subject.bundleContainer == "\(scratch.path)/bundles")
        #expect(subject.executable == "\(scratch.path)/bundles/Net.app/Net")

        let profile = try SandboxPolicy.compile(
            subject, settings: settings, kernel: kernel, arguments: ["--verbose"])
        #expect(profile.app.bundleID == "com.example.net")
        #expect(profile.uid == 3_000_000 && profile.gid == 3_000_000)
        #expect(profile.arguments == ["\(scratch.path)/bundles/Net.app/Net", "--verbose"])
        #expect(profile.hostname == "Net-Tool")
        // network.client: the host's network, port binds refused.
        #expect(!profile.namespaces.contains(.net))
        #expect(profile.denyPortBinds)
        #expect(profile.cgroupLimits == CgroupLimits(memoryMax: 64 << 20, pidsMax: 512))
        #expect(profile.groups.contains(4_000_000))
        let binds = profile.mounts.map { "\($0.kind) \($0.destination)" }
        #expect(binds.contains("roBind \(scratch.path)/bundles"))
        #expect(binds.contains("rwBind \(data)"))
        #expect(binds.contains("rwBind \(scratch.path)/groups/G1"))
        #expect(profile.environment.contains(.init(name: "HOME", value: data)))
        #expect(profile.adminOverride == nil)
    }

    @Test(
        "an admin override takes entitlements and groups away and adds its weight and environment")
    func override() throws {
        let scratch = Scratch()
        let subject = SandboxSubject(
            bundle: try bundle(scratch), dataContainer: "\(scratch.path)/data/D1", uid: 3_000_001,
            gid: 3_000_001,
            groupContainers: [
                .init(groupID: "group.example", path: "\(scratch.path)/g", gid: 4_000_001)
            ])
        let override = SandboxOverride(
            revokedEntitlements: [
                "com.apple.security.network.*", EntitlementCatalog.applicationGroups,
            ],
            cpuWeight: 50,
            environment: [
                .init(name: "PORT", value: "7000"), .init(name: "LANG", value: "de_DE.UTF-8"),
            ],
            summary: "CPUWeight=50, revoked com.apple.security.network.*")
        let profile = try SandboxPolicy.compile(
            subject, settings: SandboxSettings(), override: override, kernel: kernel)
        // Without the network entitlement: a private network namespace again.
        #expect(profile.namespaces.contains(.net))
        #expect(!profile.denyPortBinds)
        #expect(!profile.entitlements.contains { $0.key == "com.apple.security.network.client" })
        #expect(!profile.groups.contains(4_000_001))
        #expect(!profile.mounts.contains { $0.destination == "\(scratch.path)/g" })
        #expect(profile.cgroupLimits.cpuWeight == 50)
        #expect(profile.adminOverride == "CPUWeight=50, revoked com.apple.security.network.*")
        #expect(profile.environment.last == .init(name: "LANG", value: "de_DE.UTF-8"))
        #expect(profile.environment.filter { $0.name == "LANG" }.count == 1)
        #expect(profile.environment.contains(.init(name: "PORT", value: "7000")))
    }

    @Test("the patterns of RevokeEntitlements: exact, a prefix ending in *, or *")
    func patterns() {
        #expect(
            EntitlementPattern.matches(
                "com.apple.security.network.*", "com.apple.security.network.server",
                ignoringCase: false))
        #expect(
            !EntitlementPattern.matches(
                "com.apple.security.network.client", "com.apple.security.network.server",
                ignoringCase: false))
        #expect(EntitlementPattern.matches("*", "anything", ignoringCase: false))
        #expect(!EntitlementPattern.matches("Com.Apple.*", "com.apple.x", ignoringCase: false))
        #expect(EntitlementPattern.matches("Com.Apple.*", "com.apple.x", ignoringCase: true))
    }
}
