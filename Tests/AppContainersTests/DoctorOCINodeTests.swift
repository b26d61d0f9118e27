import Foundation
import Testing

/// `appd doctor` on a node that runs apps through appd-oci only: no daemon state root, and
/// still a report (issue 37: it exited 1 before checking anything).
@Suite("doctor on an appd-oci node, without a state root")
struct DoctorOCINodeTests {
    @Test("--oci reports appd-oci, its state and the signer policy; exits 0 with a signer")
    func withSigner() throws {
        let scratch = Scratch()
        let keys = scratch.sub("keys")
        try FileManager.default.createDirectory(atPath: keys, withIntermediateDirectories: true)
        let keygen = try runAppd(["keygen", "--out", keys, "--name", "fleet"])
        #expect(keygen.status == 0, "\(keygen.stderr)")
        let conf = scratch.sub("appd.conf")
        try "[Signer fleet]\nKey=\(keys)/fleet.public-key\nBundleIDs=com.example.*\n"
            .write(toFile: conf, atomically: true, encoding: .utf8)
        let result = try runAppd(["doctor", "--oci", "--config", conf])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("checking this node for appd-oci"), "\(result.stdout)")
        #expect(result.stdout.contains("oci runtime: "), "\(result.stdout)")
        #expect(result.stdout.contains("appd-oci state: /run/appd-oci"), "\(result.stdout)")
        #expect(
            result.stdout.contains("signer policy: fleet; unsigned apps refused"),
            "\(result.stdout)")
        let json = try runAppd(["doctor", "--oci", "--json", "--config", conf])
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8))
        #expect((object as? [String: Any])?["signers"] as? [String] == ["fleet"])
    }

    @Test("a policy that refuses every app image needs attention: exit 1, saying what to add")
    func noSigner() throws {
        let scratch = Scratch()
        let conf = scratch.sub("appd.conf")
        try "".write(toFile: conf, atomically: true, encoding: .utf8)
        let result = try runAppd(["doctor", "--oci", "--config", conf])
        #expect(result.status == 1)
        #expect(
            result.stdout.contains("NEEDS ATTENTION: appd.conf has no [Signer]")
                && result.stdout.contains("add a [Signer NAME]"), "\(result.stdout)")
    }
}
