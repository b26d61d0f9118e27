import AppBundle
import AppdBase
import Foundation
import Testing

@testable import AppContainers
@testable import AppdConfig

/// A key made with `appd keygen` and bundles signed with `appd sign`, as a developer would.
final class Signer {
    let scratch = Scratch("appd-signer")
    let name: String
    init(_ name: String = "dev") throws {
        self.name = name
        let result = try runAppd(["keygen", "--out", scratch.path, "--name", name, "--json"])
        guard result.status == 0 else { throw AppdError(.io, "appd keygen: \(result.stderr)") }
    }

    var privateKey: String { scratch.sub("\(name).signing-key") }
    var keyID: String { (try? publicKey.keyID) ?? "" }
    var publicKey: SignerKey {
        get throws { try SignerKey.load(scratch.sub("\(name).public-key"), relativeTo: "/") }
    }

    @discardableResult
    func sign(_ bundle: String) throws -> String {
        let result = try runAppd(["sign", "--key", privateKey, bundle])
        guard result.status == 0 else {
            throw AppdError(.invalidBundle, "appd sign: \(result.stderr)")
        }
        return bundle
    }

    /// A `[Signer]` section for this key.
    func trusted(bundleIDs: [String] = ["*"], entitlements: [String] = []) throws
        -> SigningPolicy.Signer
    {
        var signer = SigningPolicy.Signer(name: name)
        signer.key = try publicKey
        signer.bundleIDs = bundleIDs
        signer.entitlements = entitlements
        return signer
    }
}

func config(trusting signers: [SigningPolicy.Signer]) -> AppdConfiguration {
    var config = AppdConfiguration()
    config.signing.signers = signers
    return config
}

/// The message of what `body` throws, or nil.
func failure(_ body: () throws -> Void) -> AppdError? {
    do { try body() } catch let error as AppdError { return error } catch {}
    return nil
}

@Suite("install enforces code signatures and the signer policy", .serialized, rootOnly)
struct SigningTests {
    @Test(
        "the default configuration refuses an unsigned bundle; AllowUnsigned=yes takes it with a warning"
    )
    func unsigned() throws {
        let scratch = Scratch()
        let bundle = try makeBundle(at: scratch.sub("src/Hello.app"))
        let error = failure {
            _ = try store(scratch.sub("root"), config: AppdConfiguration()).install(
                bundleAt: bundle)
        }
        #expect(error?.code == .permissionDenied)
        #expect(
            error?.message == "com.example.hello is not signed; appd installs signed bundles only")
        #expect(try store(scratch.sub("root"), config: AppdConfiguration()).apps().isEmpty)

        let result = try store(scratch.sub("root"), config: unsignedConfig).install(
            bundleAt: bundle)
        #expect(result.app.signerKeyID == nil && result.signing.keyID == nil)
        #expect(result.warnings.first?.message.contains("NOT SIGNED") == true)
        try expectConsistent(scratch.sub("root"))
    }

    @Test(
        "a bundle signed by a trusted key installs; the registry records the signer, the hashes and the granted entitlements"
    )
    func trusted() throws {
        let scratch = Scratch()
        let dev = try Signer()
        let bundle = try dev.sign(
            makeBundle(
                at: scratch.sub("src/Hello.app"),
                entitlements: [
                    "com.apple.security.app-sandbox": true,
                    "com.apple.security.network.client": true,
                ]))
        let store = try store(
            scratch.sub("root"),
            config: config(trusting: [dev.trusted(entitlements: ["com.apple.security.network.*"])]))
        let app = try store.install(bundleAt: bundle).app
        #expect(app.signerKeyID == dev.keyID)
        #expect(
            app.codeResourcesHash?.count == 32 && app.executableHash?.count == 32
                && app.treeHash?.count == 32)
        #expect(try app.decodedEntitlements().bool("com.apple.security.network.client"))
        // The installed bundle still verifies as signed.
        let installed = try AppBundle.open(at: #require(app.bundlePath(in: store.root)))
        #expect(try installed.checkSignature(limits: .init()).problems.isEmpty)
        try store.checkInstalledBundle(app)
    }

    @Test("an untrusted key, and a trusted key outside its BundleIDs, are refused")
    func untrusted() throws {
        let scratch = Scratch()
        let dev = try Signer()
        let stranger = try Signer("stranger")
        let bundle = try stranger.sign(makeBundle(at: scratch.sub("src/Hello.app")))
        let root = scratch.sub("root")
        let error = failure {
            _ = try store(root, config: config(trusting: [dev.trusted()])).install(bundleAt: bundle)
        }
        #expect(
            error?.message
                == "com.example.hello is signed by key \(stranger.keyID), which this host does not trust"
        )

        let narrowed = config(trusting: [
            try stranger.trusted(bundleIDs: ["org.other.*", "com.example.hello.*"])
        ])
        let outside = failure { _ = try store(root, config: narrowed).install(bundleAt: bundle) }
        #expect(
            outside?.message
                == "key \(stranger.keyID) may not sign com.example.hello: [Signer stranger] BundleIDs=org.other.* com.example.hello.*"
        )
        let matching = config(trusting: [try stranger.trusted(bundleIDs: ["COM.EXAMPLE.*"])])
        #expect(
            try store(root, config: matching).install(bundleAt: bundle).app.bundleID
                == "com.example.hello")
    }

    @Test("entitlements the signer may not grant are refused, every one of them listed")
    func forbiddenEntitlements() throws {
        let scratch = Scratch()
        let dev = try Signer()
        let bundle = try dev.sign(
            makeBundle(
                at: scratch.sub("src/Hello.app"),
                entitlements: [
                    "com.apple.security.app-sandbox": true,
                    "com.apple.security.network.client": true,
                    "com.apple.security.network.server": true,
                    "com.apple.security.cs.allow-jit": true,
                ]))
        let policy = config(trusting: [
            try dev.trusted(entitlements: ["com.apple.security.network.client"])
        ])
        let error = failure {
            _ = try store(scratch.sub("root"), config: policy).install(bundleAt: bundle)
        }
        #expect(error?.code == .permissionDenied)
        #expect(
            error?.message
                == "com.example.hello requests entitlements that signer 'dev' (key \(dev.keyID)) may not grant: com.apple.security.cs.allow-jit, com.apple.security.network.server"
        )
        #expect(try store(scratch.sub("root"), config: policy).apps().isEmpty)
        // A second section for the same key adds to what it may grant.
        var more = try dev.trusted(entitlements: [
            "com.apple.security.network.server", "com.apple.security.cs.*",
        ])
        more.name = "dev-jit"
        let both = config(trusting: [
            try dev.trusted(entitlements: ["com.apple.security.network.client"]), more,
        ])
        #expect(
            try store(scratch.sub("root"), config: both).install(bundleAt: bundle).signing
                .signerNames == ["dev", "dev-jit"])
    }

    @Test(
        "a bundle changed after signing is refused at install, naming each file, leaving nothing behind"
    )
    func tamperedBeforeInstall() throws {
        let scratch = Scratch()
        let dev = try Signer()
        let bundle = try dev.sign(
            makeBundle(at: scratch.sub("src/Hello.app"), extraFiles: ["a.txt": "a", "b.txt": "b"]))
        try "evil".write(toFile: "\(bundle)/a.txt", atomically: false, encoding: .utf8)
        unlink("\(bundle)/b.txt")
        try "new".write(toFile: "\(bundle)/c.txt", atomically: false, encoding: .utf8)
        let root = scratch.sub("root")
        let error = failure {
            _ = try store(root, config: config(trusting: [dev.trusted()])).install(bundleAt: bundle)
        }
        #expect(error?.code == .invalidBundle)
        #expect(
            error?.headline
                == "\(bundle): does not match its code signature (3 problems)"
        )
        #expect(
            error?.problems.map(\.description) == [
                "a.txt: was changed after signing (its SHA-256 differs from CodeResources)",
                "c.txt: was added after signing (CodeResources does not list it)",
                "b.txt: was removed after signing (CodeResources lists it)",
            ])
        try expectConsistent(root)
        #expect(try store(root).apps().isEmpty)
    }

    @Test(
        "an upgrade must come from the installed version's signer unless the signer change is allowed"
    )
    func sameSigner() throws {
        let scratch = Scratch()
        let dev = try Signer()
        let other = try Signer("other")
        let root = scratch.sub("root")
        let policy = config(trusting: [try dev.trusted(), try other.trusted()])
        try store(root, config: policy).install(
            bundleAt: dev.sign(makeBundle(at: scratch.sub("v1/Hello.app"), version: "1")))
        let v2 = try other.sign(makeBundle(at: scratch.sub("v2/Hello.app"), version: "2"))
        let error = failure { _ = try store(root, config: policy).install(bundleAt: v2) }
        #expect(error?.code == .conflict)
        #expect(
            error?.message.contains(
                "is installed signed by key \(dev.keyID); this bundle is signed by key \(other.keyID)"
            ) == true)
        var force = InstallOptions()
        force.allowSignerChange = true
        #expect(
            try store(root, config: policy).install(bundleAt: v2, options: force).app.signerKeyID
                == other.keyID)
        // An unsigned bundle cannot replace a signed one either, even where unsigned ones are allowed.
        var lax = policy
        lax.signing.allowUnsigned = true
        let unsigned = try makeBundle(at: scratch.sub("v3/Hello.app"), version: "3")
        #expect(
            failure { _ = try store(root, config: lax).install(bundleAt: unsigned) }?.code
                == .conflict)
    }

    @Test(
        "a bundle container changed after install is refused at launch: a resource by the tree check, the executable always"
    )
    func tamperedAfterInstall() throws {
        let scratch = Scratch()
        let dev = try Signer()
        let bundle = try dev.sign(
            makeBundle(at: scratch.sub("src/Hello.app"), extraFiles: ["Resources/data.txt": "data"])
        )
        var policy = config(trusting: [try dev.trusted()])
        let app = try store(scratch.sub("root"), config: policy).install(bundleAt: bundle).app
        let installed = try #require(app.bundlePath(in: StateRoot(path: scratch.sub("root"))))
        try store(scratch.sub("root"), config: policy).checkInstalledBundle(app)

        try overwrite("\(installed)/Resources/data.txt", with: "evil")
        let error = failure {
            _ = try store(scratch.sub("root"), config: policy).checkInstalledBundle(app)
        }
        #expect(error?.code == .corruptState)
        #expect(
            error?.problems.map(\.description) == [
                "Resources/data.txt: was changed after signing (its SHA-256 differs from CodeResources)"
            ])

        // With the tree check off, only the executable is compared: the resource passes, the
        // executable does not.
        policy.signing.launchCheckMaxBytes = 0
        try store(scratch.sub("root"), config: policy).checkInstalledBundle(app)
        try overwrite("\(installed)/Hello", with: "#!/bin/sh\necho pwned\n")
        let exe = failure {
            _ = try store(scratch.sub("root"), config: policy).checkInstalledBundle(app)
        }
        #expect(
            exe?.message.contains(
                "the executable \(installed)/Hello was changed after it was installed") == true)
    }

    @Test(
        "the launch check hashes a bundle once and then trusts its fingerprint; any change to the tree, even with its mtime put back, makes it hash again and refuse"
    )
    func launchCheckFingerprint() throws {
        let scratch = Scratch()
        let dev = try Signer()
        let bundle = try dev.sign(
            makeBundle(at: scratch.sub("src/Hello.app"), extraFiles: ["Resources/data.txt": "data"])
        )
        let policy = config(trusting: [try dev.trusted()])
        let appStore = try store(scratch.sub("root"), config: policy)
        let app = try appStore.install(bundleAt: bundle).app
        let installed = try #require(app.bundlePath(in: StateRoot(path: scratch.sub("root"))))
        try appStore.checkInstalledBundle(app)
        try appStore.checkInstalledBundle(app)
        try appStore.checkInstalledBundle(app)
        #expect(appStore.launchChecks.hashCount == 1)

        // Same size, same mtime as before: only the change time and the bytes differ.
        let path = "\(installed)/Resources/data.txt"
        var before = stat()
        #expect(stat(path, &before) == 0)
        try overwrite(path, with: "evil")
        var times = [before.st_atim, before.st_mtim]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        chmod(path, before.st_mode & 0o7777)
        for _ in 0..<2 {
            let error = failure { try appStore.checkInstalledBundle(app) }
            #expect(error?.code == .corruptState)
            #expect(
                error?.problems.map(\.description) == [
                    "Resources/data.txt: was changed after signing (its SHA-256 differs from CodeResources)"
                ])
        }
        #expect(appStore.launchChecks.hashCount == 3)

        // Put back as it was (the bytes; the change time moves again): one hash, then trusted.
        try overwrite(path, with: "data")
        try appStore.checkInstalledBundle(app)
        try appStore.checkInstalledBundle(app)
        #expect(appStore.launchChecks.hashCount == 4)

        // A file added is a change too, also one no bundle may hold (a FIFO).
        #expect(mkfifo("\(installed)/Resources/pipe", 0o444) == 0)
        let added = failure { try appStore.checkInstalledBundle(app) }
        #expect(added?.code == .corruptState)
        #expect(added?.problems.map(\.description) == ["Resources/pipe: is a FIFO"])
    }

    /// Root may write the read-only installed files, as an attacker with root or the disk could.
    func overwrite(_ path: String, with text: String) throws {
        chmod(path, 0o644)
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o444)
    }

    @Test("appd verify names what changed after signing and exits 1; appd install refuses it")
    func verifyCommand() throws {
        let scratch = Scratch()
        let dev = try Signer()
        let bundle = try dev.sign(makeBundle(at: scratch.sub("src/Hello.app")))
        let ok = try runAppd(["verify", bundle, "--json"])
        #expect(ok.status == 0 && ok.stdout.contains("\"keyID\" : \"\(dev.keyID)\""))
        let wider = try PropertyListSerialization.data(
            fromPropertyList: [
                "com.apple.security.app-sandbox": true, "com.apple.security.network.server": true,
            ],
            format: .xml, options: 0)
        try wider.write(to: URL(fileURLWithPath: "\(bundle)/Entitlements.plist"))
        let bad = try runAppd(["verify", bundle])
        #expect(bad.status == 1)
        #expect(bad.stderr.contains("Entitlements.plist: was changed after signing"))
        let install = try runAppd(["install", "--no-daemon", "--root", scratch.sub("root"), bundle])
        #expect(install.status == 1)
    }
}

@Suite("appd.conf: [Signing] and [Signer NAME]")
struct SigningConfigurationTests {
    @Test("signer sections read keys from files or inline, patterns, and the [Signing] settings")
    func parse() throws {
        let scratch = Scratch()
        let identity = SigningIdentity.generate(name: "dev")
        try identity.publicKeyFile.write(to: URL(fileURLWithPath: scratch.sub("dev.public-key")))
        let inline = "ed25519:" + Data(identity.publicKey.raw).base64EncodedString()
        let config = try AppdConfiguration.parse(
            """
            [Signing]
            AllowUnsigned=yes
            UnsignedEntitlements=com.apple.security.network.client
            LaunchCheckMaxBytes=1M
            [Signer dev]
            Key=dev.public-key
            BundleIDs=com.example.*
            Entitlements=com.apple.security.network.* com.apple.security.cs.allow-jit
            [Signer inline]
            Key=\(inline)
            """, file: scratch.sub("appd.conf"))
        #expect(config.signing.allowUnsigned && config.signing.launchCheckMaxBytes == 1 << 20)
        #expect(config.signing.unsignedEntitlements == ["com.apple.security.network.client"])
        #expect(config.signing.signers.map(\.name) == ["dev", "inline"])
        #expect(config.signing.signers.allSatisfy { $0.key == identity.publicKey })
        #expect(
            config.signing.signers[0].bundleIDs == ["com.example.*"]
                && config.signing.signers[1].bundleIDs == ["*"])
        #expect(
            config.signing.signers[0].entitlements.count == 2
                && config.signing.signers[1].entitlements.isEmpty)
        #expect(
            !AppdConfiguration().signing.allowUnsigned
                && AppdConfiguration().signing.signers.isEmpty)
    }

    @Test(
        "signer mistakes are errors naming the section",
        arguments: [
            ("[Signer dev]\nBundleIDs=*\n", "t.conf: [Signer dev] has no Key="),
            (
                "[Signer]\n",
                "t.conf:1: [Signer] needs one word as the signer's name, like [Signer example]"
            ),
            (
                "[Signer a]\nKey=ed25519:AAAA\n",
                "t.conf:2: [Signer a] Key=: an Ed25519 public key is 32 bytes, not 3"
            ),
            (
                "[Signer a]\nKey=/nonexistent.public-key\n",
                "t.conf:2: [Signer a] Key=: the public key file /nonexistent.public-key is missing or unreadable"
            ),
            (
                "[Signer a]\nBundleIDs=com.*.x\n",
                "t.conf:2: [Signer a] BundleIDs=com.*.x is not a list of patterns (exact, a prefix ending in *, or *)"
            ),
            ("[Signer a]\nKeys=x\n", "t.conf:2: unknown key Keys in [Signer a]"),
            (
                "[Signing]\nAllowUnsigned=maybe\n",
                "t.conf:2: [Signing] AllowUnsigned=maybe is not yes or no"
            ),
            ("[Signer a]\n[Signer a]\n", "t.conf:2: [Signer a] appears twice"),
        ])
    func mistakes(_ text: String, _ expected: String) {
        #expect(
            failure { _ = try AppdConfiguration.parse(text, file: "t.conf") }?.message == expected)
    }
}
