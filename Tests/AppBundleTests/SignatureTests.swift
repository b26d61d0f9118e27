import AppdBase
import Foundation
import Testing

@testable import AppBundle

@Suite("code signatures: CodeResources and Ed25519")
struct SignatureTests {
    let identity = SigningIdentity.generate(name: "test")
    let sandbox = plist(["com.apple.security.app-sandbox": true])

    /// A signed bundle with a resource, a symlink and an empty directory.
    func signedBundle(
        _ scratch: Scratch, _ name: String = "Hello.app", id: String = "com.example.hello"
    ) throws -> String {
        var info = validInfo
        info["CFBundleIdentifier"] = id
        let path = try makeBundle(scratch.sub(name), info: info, entitlements: sandbox)
        try write("hi\n", to: "\(path)/Resources/greeting.txt")
        symlink("Resources/greeting.txt", "\(path)/greeting")
        try FileManager.default.createDirectory(
            atPath: "\(path)/Empty", withIntermediateDirectories: true)
        try sign(path, with: identity)
        return path
    }

    @Test(
        "a signed bundle verifies: every file, symlink and empty directory is covered, by the signer's key"
    )
    func roundTrip() throws {
        let scratch = Scratch()
        let path = try signedBundle(scratch)
        let check = try AppBundle.open(at: path).checkSignature(limits: .init())
        #expect(check.problems.isEmpty)
        let signature = try #require(check.signature)
        #expect(signature.keyID == identity.publicKey.keyID && signature.keyID.count == 16)
        #expect(signature.publicKey == identity.publicKey)
        #expect(
            Set(signature.resources.entries.keys)
                == [
                    "Hello", "Info.plist", "Entitlements.plist", "Resources/greeting.txt",
                    "greeting", "Empty",
                ])
        #expect(
            signature.resources.entries["greeting"] == .symlink(target: "Resources/greeting.txt"))
        #expect(signature.resources.entries["Empty"] == .emptyDirectory)
        #expect(signature.resources == check.manifest)
    }

    @Test(
        "CodeResources is the same bytes for the same tree, and an unsigned bundle has no signature"
    )
    func deterministic() throws {
        let scratch = Scratch()
        let path = try signedBundle(scratch)
        let first = try Data(
            contentsOf: URL(fileURLWithPath: "\(path)/_CodeSignature/CodeResources"))
        try sign(path, with: identity)
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: "\(path)/_CodeSignature/CodeResources"))
                == first)
        let unsigned = try makeBundle(scratch.sub("Plain.app"))
        #expect(try AppBundle.open(at: unsigned).checkSignature(limits: .init()).signature == nil)
    }

    @Test("a file added after signing (CodeResources omits it) is named")
    func added() throws {
        let scratch = Scratch()
        let path = try signedBundle(scratch)
        try write("evil", to: "\(path)/Resources/payload.so")
        #expect(
            signatureProblems(path) == [
                "Resources/payload.so: was added after signing (CodeResources does not list it)"
            ])
    }

    @Test("a CodeResources re-signed without an entry does not cover that file")
    func omittedEntry() throws {
        let scratch = Scratch()
        let path = try signedBundle(scratch)
        let signed = try #require(try CodeSignature.read(bundleAt: path, layout: .ios))
        var manifest = signed.resources
        manifest.entries["Resources/greeting.txt"] = nil
        let (resources, signature) = try CodeSignature.sign(manifest, with: identity)
        try resources.write(to: URL(fileURLWithPath: "\(path)/_CodeSignature/CodeResources"))
        try signature.write(to: URL(fileURLWithPath: "\(path)/_CodeSignature/Signature"))
        #expect(
            signatureProblems(path) == [
                "Resources/greeting.txt: was added after signing (CodeResources does not list it)"
            ])
    }

    @Test("a file in CodeResources but missing from the bundle is named")
    func removed() throws {
        let scratch = Scratch()
        let path = try signedBundle(scratch)
        unlink("\(path)/Resources/greeting.txt")
        unlink("\(path)/greeting")
        rmdir("\(path)/Empty")
        #expect(
            signatureProblems(path) == [
                // Resources/ is empty now: an empty directory is an entry of its own.
                "Resources: was added after signing (CodeResources does not list it)",
                "Empty: was removed after signing (CodeResources lists it)",
                "Resources/greeting.txt: was removed after signing (CodeResources lists it)",
                "greeting: was removed after signing (CodeResources lists it)",
            ])
    }

    @Test("a symlink retargeted after signing is named with both targets")
    func retargeted() throws {
        let scratch = Scratch()
        let path = try signedBundle(scratch)
        unlink("\(path)/greeting")
        symlink("Info.plist", "\(path)/greeting")
        #expect(
            signatureProblems(path) == [
                "greeting: is a symlink retargeted after signing: it points to 'Info.plist', CodeResources says 'Resources/greeting.txt'"
            ])
    }

    @Test(
        "Entitlements.plist or Info.plist edited after signing is named",
        arguments: ["Entitlements.plist", "Info.plist"])
    func plistEdited(_ file: String) throws {
        let scratch = Scratch()
        let path = try signedBundle(scratch)
        if file == "Info.plist" {
            var info = validInfo
            info["CFBundleVersion"] = "2"
            try plist(info).write(to: URL(fileURLWithPath: "\(path)/Info.plist"))
        } else {
            try plist([
                "com.apple.security.app-sandbox": true, "com.apple.security.network.server": true,
            ])
            .write(to: URL(fileURLWithPath: "\(path)/Entitlements.plist"))
        }
        #expect(
            signatureProblems(path) == [
                "\(file): was changed after signing (its SHA-256 differs from CodeResources)"
            ])
    }

    @Test("a signature over a different CodeResources does not verify")
    func differentCodeResources() throws {
        let scratch = Scratch()
        let path = try signedBundle(scratch)
        // Tamper with a file and "fix" CodeResources to match, keeping the old Signature.
        try write("evil\n", to: "\(path)/Resources/greeting.txt")
        var manifest = try #require(try CodeSignature.read(bundleAt: path, layout: .ios)).resources
        manifest.entries["Resources/greeting.txt"] = .file(sha256: Array(repeating: 7, count: 32))
        try CodeResources.encode(manifest).write(
            to: URL(fileURLWithPath: "\(path)/_CodeSignature/CodeResources"))
        let problems = signatureProblems(path)
        #expect(problems.count == 1)
        #expect(
            problems.first?.hasPrefix(
                "_CodeSignature/Signature: does not verify: _CodeSignature/CodeResources is not what key \(identity.publicKey.keyID) signed"
            ) == true)
    }

    @Test("a truncated or malformed Signature is refused, naming the file")
    func malformed() throws {
        let scratch = Scratch()
        let path = try signedBundle(scratch)
        let file = "\(path)/_CodeSignature/Signature"
        let good = try Data(contentsOf: URL(fileURLWithPath: file))
        try good.prefix(good.count / 2).write(to: URL(fileURLWithPath: file))
        #expect(
            signatureProblems(path).first?.hasPrefix(
                "_CodeSignature/Signature: is malformed or truncated") == true)

        // Well-formed, but the signature is cut short.
        let text = String(decoding: good, as: UTF8.self)
        let signature = try #require(
            text.firstMatch(of: #/<key>signature</key>\s*<data>([^<]+)</data>/#)
        ).1
        let short = Data(base64Encoded: String(signature))!.prefix(40).base64EncodedString()
        try text.replacingOccurrences(of: String(signature), with: short).write(
            toFile: file, atomically: false, encoding: .utf8)
        #expect(
            signatureProblems(path) == [
                "_CodeSignature/Signature: signature is 40 bytes; an Ed25519 signature is 64 (truncated?)"
            ])

        try Data("garbage".utf8).write(to: URL(fileURLWithPath: file))
        #expect(
            signatureProblems(path).first?.hasPrefix(
                "_CodeSignature/Signature: is malformed or truncated") == true)
        unlink(file)
        #expect(
            signatureProblems(path) == [
                "_CodeSignature/Signature: is missing, but _CodeSignature/CodeResources exists; sign the bundle again (appd sign)"
            ])
    }

    @Test("a key id that does not name the embedded key is refused; so is a key swapped in")
    func wrongKeyID() throws {
        let scratch = Scratch()
        let path = try signedBundle(scratch)
        let other = SigningIdentity.generate(name: "other")
        let file = "\(path)/_CodeSignature/Signature"
        let text = try String(contentsOfFile: file, encoding: .utf8)
        try text.replacingOccurrences(of: identity.publicKey.keyID, with: other.publicKey.keyID)
            .write(toFile: file, atomically: false, encoding: .utf8)
        #expect(
            signatureProblems(path) == [
                "_CodeSignature/Signature: keyID \(other.publicKey.keyID) is wrong: the embedded public key's id is \(identity.publicKey.keyID)"
            ])

        // Both the id and the key of another signer, over this signer's signature.
        try text.replacingOccurrences(of: identity.publicKey.keyID, with: other.publicKey.keyID)
            .replacingOccurrences(
                of: Data(identity.publicKey.raw).base64EncodedString(),
                with: Data(other.publicKey.raw).base64EncodedString()
            )
            .write(toFile: file, atomically: false, encoding: .utf8)
        #expect(signatureProblems(path).first?.contains("does not verify") == true)
    }

    @Test("a signature copied from another app is refused, alone or with its CodeResources")
    func copiedFromAnotherApp() throws {
        let scratch = Scratch()
        let path = try signedBundle(scratch)
        let donor = try signedBundle(scratch, "Other.app", id: "com.example.other")
        try FileManager.default.removeItem(atPath: "\(path)/_CodeSignature/Signature")
        try FileManager.default.copyItem(
            atPath: "\(donor)/_CodeSignature/Signature", toPath: "\(path)/_CodeSignature/Signature")
        #expect(signatureProblems(path).first?.contains("does not verify") == true)

        try FileManager.default.removeItem(atPath: "\(path)/_CodeSignature")
        try FileManager.default.copyItem(
            atPath: "\(donor)/_CodeSignature", toPath: "\(path)/_CodeSignature")
        #expect(
            signatureProblems(path) == [
                "Info.plist: was changed after signing (its SHA-256 differs from CodeResources)"
            ])
    }

    @Test(
        "names that differ only by Unicode normalization or case cannot be signed, and are named when added"
    )
    func clashingNames() throws {
        let scratch = Scratch()
        let nfc = "caf\u{E9}.txt"
        let nfd = "cafe\u{301}.txt"
        #expect(Array(nfc.utf8) != Array(nfd.utf8))
        for (a, b, why) in [
            (nfc, nfd, "differ only by Unicode normalization"),
            ("Readme", "README", "differ only by case"),
        ] {
            let path = try makeBundle(scratch.sub("\(b).app"), entitlements: sandbox)
            try write("1", to: "\(path)/\(a)")
            try write("2", to: "\(path)/\(b)")
            #expect(throws: AppdError.self) { try sign(path, with: identity) }
            let problems =
                (try? AppBundle.open(at: path).checkSignature(limits: .init()).problems) ?? []
            #expect(problems.map(\.message).contains { $0.contains(why) }, "\(a) / \(b)")

            // Signed with one of them, then the twin added: both the clash and the addition.
            unlink("\(path)/\(b)")
            try sign(path, with: identity)
            try write("2", to: "\(path)/\(b)")
            let after = signatureProblems(path)
            #expect(after.contains { $0.contains(why) }, "\(after)")
        }
    }

    @Test(
        "key files: the private key signs, the public key file names the same key id, a forged id is refused"
    )
    func keyFiles() throws {
        let scratch = Scratch()
        try identity.privateKeyFile.write(to: URL(fileURLWithPath: scratch.sub("k.signing-key")))
        try identity.publicKeyFile.write(to: URL(fileURLWithPath: scratch.sub("k.public-key")))
        let loaded = try SigningIdentity.load(path: scratch.sub("k.signing-key"))
        #expect(loaded.publicKey == identity.publicKey && loaded.name == "test")
        #expect(try SignerKey.load("k.public-key", relativeTo: scratch.path) == identity.publicKey)
        #expect(
            try SignerKey.load(
                "ed25519:" + Data(identity.publicKey.raw).base64EncodedString(), relativeTo: "/")
                == identity.publicKey)
        #expect(throws: AppdError.self) {
            try SigningIdentity.load(path: scratch.sub("k.public-key"))
        }
        let forged = String(decoding: identity.publicKeyFile, as: UTF8.self)
            .replacingOccurrences(of: identity.publicKey.keyID, with: "0000000000000000")
        try forged.write(toFile: scratch.sub("f.public-key"), atomically: false, encoding: .utf8)
        #expect(throws: AppdError.self) {
            try SignerKey.load("f.public-key", relativeTo: scratch.path)
        }
    }
}
