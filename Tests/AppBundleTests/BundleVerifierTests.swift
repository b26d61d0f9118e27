import AppdBase
import Foundation
import Testing

@testable import AppBundle

/// A policy that records what it was asked and refuses when told to.
private final class RecordingPolicy: SignerPolicy, @unchecked Sendable {
    var asked: [(keyID: String?, bundleID: String, entitlements: [String], hosts: [String])] = []
    var refusal: AppdError?

    func authorize(
        signature: CodeSignature?, bundleID: String, entitlements: Entitlements,
        hostExecutables: [String], handlers: BundleHandlers
    ) throws -> SigningDecision {
        asked.append(
            (signature?.keyID, bundleID, entitlements.values.keys.sorted(), hostExecutables))
        if let refusal { throw refusal }
        return SigningDecision(keyID: signature?.keyID, signerNames: ["test"], warning: nil)
    }
}

/// A host on another CPU: every bundle program is refused on it.
private struct OtherCPUHost: ProgramHost {
    var architecture = "riscv64"
    var name: String { "the riscv64 host" }
    func hasFile(_ path: String, elfClass: ELFFile.Class?, machine: UInt16?) -> Bool { true }
    func library(
        _ name: String, elfClass: ELFFile.Class, machine: UInt16, in directories: [String]?
    ) -> String? { nil }
}

@Suite("BundleVerifier: the one verification of a bundle")
struct BundleVerifierTests {
    let identity = SigningIdentity.generate(name: "test")

    func signedBundle(_ scratch: Scratch) throws -> String {
        let path = try makeBundle(
            scratch.sub("Hello.app"),
            entitlements: plist(["com.apple.security.app-sandbox": true]))
        try write("data\n", to: "\(path)/Resources/data.txt")
        try sign(path, with: identity)
        return path
    }

    func refusal(_ body: () throws -> Void) -> AppdError? {
        do { try body() } catch let error as AppdError { return error } catch {}
        return nil
    }

    @Test("a signed bundle passes both steps: its signature, its decision and its manifest")
    func verified() throws {
        let scratch = Scratch()
        let path = try signedBundle(scratch)
        let policy = RecordingPolicy()
        let verifier = BundleVerifier(limits: .init(), policy: policy)
        var verified = try verifier.verifyMetadata(at: path)
        #expect(verified.signature?.keyID == identity.publicKey.keyID)
        #expect(verified.decision?.signerNames == ["test"])
        #expect(verified.manifest == nil)
        #expect(policy.asked.count == 1)
        #expect(policy.asked.first?.bundleID == "com.example.hello")
        #expect(policy.asked.first?.entitlements == ["com.apple.security.app-sandbox"])
        try verifier.verifyContents(&verified)
        #expect(verified.manifest == verified.signature?.resources)
        #expect(try verifier.verify(at: path).manifest == verified.manifest)
    }

    @Test(
        "a resource changed after signing passes the quick step and is refused by the contents, with the same error as a whole verify"
    )
    func tamperedResource() throws {
        let scratch = Scratch()
        let path = try signedBundle(scratch)
        try write("evil\n", to: "\(path)/Resources/data.txt")
        let verifier = BundleVerifier(limits: .init())
        var verified = try verifier.verifyMetadata(at: path)
        let contents = refusal { try verifier.verifyContents(&verified) }
        let whole = refusal { _ = try verifier.verify(at: path) }
        #expect(contents?.code == .invalidBundle)
        #expect(contents?.headline == "\(path): does not match its code signature (1 problem)")
        #expect(
            contents?.problems.map(\.description) == [
                "Resources/data.txt: was changed after signing (its SHA-256 differs from CodeResources)"
            ])
        #expect(whole == contents)
    }

    @Test(
        "an Info.plist changed after signing is refused by the quick step, before the policy is asked"
    )
    func tamperedInfoPlist() throws {
        let scratch = Scratch()
        let path = try signedBundle(scratch)
        var info = validInfo
        info["CFBundleVersion"] = "2"
        try plist(info).write(to: URL(fileURLWithPath: "\(path)/Info.plist"))
        let policy = RecordingPolicy()
        let error = refusal {
            _ = try BundleVerifier(limits: .init(), policy: policy).verifyMetadata(at: path)
        }
        #expect(error?.headline == "\(path): does not match its code signature (1 problem)")
        #expect(
            error?.problems.map(\.description) == [
                "Info.plist: was changed after signing (its SHA-256 differs from CodeResources)"
            ])
        #expect(policy.asked.isEmpty)
    }

    @Test("the policy's refusal and the host's are the verifier's")
    func policyAndHost() throws {
        let scratch = Scratch()
        let path = try signedBundle(scratch)
        let policy = RecordingPolicy()
        policy.refusal = AppdError(.permissionDenied, "not trusted here")
        let refused = refusal {
            _ = try BundleVerifier(limits: .init(), policy: policy).verifyMetadata(at: path)
        }
        #expect(refused?.code == .permissionDenied && refused?.message == "not trusted here")

        var info = validInfo
        info["UIRequiredDeviceCapabilities"] = ["arm64"]
        let other = try makeBundle(scratch.sub("Other.app"), info: info)
        let host = refusal {
            _ = try BundleVerifier(limits: .init(), host: OtherCPUHost()).verifyMetadata(at: other)
        }
        #expect(host?.message.hasPrefix("Other.app cannot run on the riscv64 host") == true)
        // Without a host the programs are not checked (appd verify reports them itself).
        _ = try BundleVerifier(limits: .init()).verifyMetadata(at: other)
    }

    @Test("an unsigned bundle with a clash is not a valid app bundle")
    func unsigned() throws {
        let scratch = Scratch()
        let path = try makeBundle(scratch.sub("Hello.app"))
        try write("a", to: "\(path)/Readme")
        try write("b", to: "\(path)/README")
        let error = refusal { _ = try BundleVerifier(limits: .init()).verify(at: path) }
        #expect(error?.headline == "\(path): not a valid app bundle (1 problem)")
    }

    @Test("the seal: nothing for the tree as sealed, each changed file while CodeResources is")
    func sealed() throws {
        let scratch = Scratch()
        let path = try signedBundle(scratch)
        let verifier = BundleVerifier(limits: .init())
        let verified = try verifier.verify(at: path)
        let digest = try #require(verified.manifest).digest
        let resources = try #require(verified.signature).codeResourcesDigest
        #expect(
            try verifier.changes(
                sinceSealed: digest, at: path, layout: .ios, codeResourcesDigest: resources) == nil)
        try write("evil\n", to: "\(path)/Resources/data.txt")
        #expect(
            try verifier.changes(
                sinceSealed: digest, at: path, layout: .ios, codeResourcesDigest: resources)?
                .map(\.description) == [
                    "Resources/data.txt: was changed after signing (its SHA-256 differs from CodeResources)"
                ])
        // Re-signed over the change: the tree still differs from its seal, said as a whole.
        try sign(path, with: identity)
        #expect(
            try verifier.changes(
                sinceSealed: digest, at: path, layout: .ios, codeResourcesDigest: resources)?
                .map(\.description) == [
                    "the tree's SHA-256 differs from the one recorded at install"
                ])
    }
}
