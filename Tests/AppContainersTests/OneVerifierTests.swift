import AppBundle
import AppdBase
import AppdConfig
import Foundation
import Sandbox
import TestSupport
import Testing

@testable import AppContainers

/// Install, `appd verify`, `appd image`, the image check of appd-oci's create and the launch
/// check all verify through `BundleVerifier`: one bundle changed after signing gets one answer
/// from each, the verifier's own.
@Suite(
    "one verifier: install, verify, image and the launch check refuse alike", .serialized, rootOnly)
struct OneVerifierTests {
    /// A signed bundle with `Resources/data.txt` changed after signing, and the policy that
    /// trusts its signer.
    func tampered(_ scratch: Scratch) throws -> (bundle: String, config: AppdConfiguration) {
        let dev = try Signer()
        let bundle = try dev.sign(
            makeBundle(at: scratch.sub("src/Hello.app"), extraFiles: ["Resources/data.txt": "data"])
        )
        try "evil".write(toFile: "\(bundle)/Resources/data.txt", atomically: false, encoding: .utf8)
        return (bundle, config(trusting: [try dev.trusted()]))
    }

    /// What the verifier itself says of the bundle, both steps.
    func verifierSays(_ bundle: String, _ config: AppdConfiguration) throws -> AppdError {
        let verifier = BundleVerifier(
            config, host: try HostLibraries(systemPaths: config.sandbox.systemPaths))
        let error = failure {
            var verified = try verifier.verifyMetadata(at: bundle)
            try verifier.verifyContents(&verified)
        }
        return try #require(error)
    }

    @Test("install and the image check refuse a tampered bundle with the verifier's error")
    func inProcess() throws {
        let scratch = Scratch()
        let (bundle, config) = try tampered(scratch)
        let expected = try verifierSays(bundle, config)
        #expect(expected.headline == "\(bundle): does not match its code signature (1 problem)")
        #expect(
            expected.problems.map(\.description) == [
                "Resources/data.txt: was changed after signing (its SHA-256 differs from CodeResources)"
            ])

        let install = failure {
            _ = try store(scratch.sub("root"), config: config).install(bundleAt: bundle)
        }
        #expect(install == expected)

        let image = failure {
            var check = try AppImageCheck.verify(
                at: bundle,
                with: BundleVerifier(
                    config, host: try HostLibraries(systemPaths: config.sandbox.systemPaths)))
            try check.checkContents(limits: config.bundleLimits)
        }
        // The same error, its bundle shown where the image has it.
        #expect(image == expected.viewing(.bundle, as: "/Hello.app"))
        #expect(image?.headline == "/Hello.app: does not match its code signature (1 problem)")
    }

    @Test("appd verify and appd image print the verifier's error for a tampered bundle")
    func commands() throws {
        let scratch = Scratch()
        let (bundle, config) = try tampered(scratch)
        let expected = try verifierSays(bundle, config)
        let first = "appd: \(expected.headline)\n  \(expected.problems[0])\n"
        let verify = try runAppd(["verify", bundle])
        #expect(verify.status == 1)
        #expect(verify.stderr.hasPrefix(first), "\(verify.stderr)")
        let image = try runAppd(["image", bundle, "-o", scratch.sub("hello.tar")])
        #expect(image.status == 1)
        #expect(image.stderr.hasPrefix(first), "\(image.stderr)")
    }

    @Test("the launch check names what changed as the verifier's seal check does")
    func launchCheck() throws {
        let scratch = Scratch()
        let dev = try Signer()
        let bundle = try dev.sign(
            makeBundle(at: scratch.sub("src/Hello.app"), extraFiles: ["Resources/data.txt": "data"])
        )
        let policy = config(trusting: [try dev.trusted()])
        let installed = try store(scratch.sub("root"), config: policy).install(bundleAt: bundle)
        let app = installed.app
        let path = try #require(app.bundlePath(in: StateRoot(path: scratch.sub("root"))))
        chmod("\(path)/Resources/data.txt", 0o644)
        try "evil".write(toFile: "\(path)/Resources/data.txt", atomically: false, encoding: .utf8)
        let expected = try BundleVerifier(limits: policy.bundleLimits).changes(
            sinceSealed: Array(try #require(app.treeHash)), at: path, layout: .ios,
            codeResourcesDigest: app.codeResourcesHash.map(Array.init))
        #expect(
            expected?.map(\.description) == [
                "Resources/data.txt: was changed after signing (its SHA-256 differs from CodeResources)"
            ])
        let error = failure {
            try store(scratch.sub("root"), config: policy).checkInstalledBundle(app)
        }
        #expect(error?.code == .corruptState)
        #expect(error?.problems == expected)
    }
}
