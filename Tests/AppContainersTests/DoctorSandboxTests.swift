import Foundation
import Sandbox
import Testing

@testable import AppContainers

/// `appd doctor` says what this kernel's sandbox layers mean for each kind of app
/// (docs/sandbox-layers.md).
@Suite("doctor reports the sandbox layers", .serialized, rootOnly)
struct DoctorSandboxTests {
    @Test(
        "on Debian 12's Landlock ABI 2 every kind of app launches, with the reduced layers named; without Landlock all are refused"
    )
    func reportPerKernel() throws {
        let scratch = Scratch()
        let store = try store(scratch.sub("root"))
        let abi2 = try store.doctor(
            repair: false, kernel: KernelLayers(landlockABI: 2, seccomp: true))
        #expect(abi2.sandbox.map(\.apps) == ["no network", "network.client", "network.server"])
        #expect(abi2.sandbox.allSatisfy { $0.launches })
        #expect(
            abi2.sandbox[1].notes.contains {
                $0.hasPrefix("reduced: Landlock ABI 2 has no TCP rules")
            })
        #expect(abi2.findings.isEmpty)
        let none = try store.doctor(
            repair: false, kernel: KernelLayers(landlockABI: 0, seccomp: true))
        #expect(
            none.sandbox.allSatisfy {
                !$0.launches && $0.notes[0].contains("WeakerModes=no-landlock")
            })
    }

    @Test(
        "appd doctor prints a line per kind of app and the oci runtime line, and --json has them"
    )
    func printed() throws {
        let scratch = Scratch()
        let root = scratch.sub("root")
        _ = try store(root)
        let text = try runAppd(["doctor", "--check-only", "--root", root])
        #expect(text.status == 0, "\(text.stderr)")
        for kind in ["no network", "network.client", "network.server"] {
            #expect(text.stdout.contains("sandbox: apps with \(kind): launch"), "\(text.stdout)")
        }
        let json = try runAppd(["doctor", "--check-only", "--json", "--root", root])
        let object =
            try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect((object?["sandbox"] as? [Any])?.count == 3, "\(json.stdout)")
        // Which OCI engines call appd-oci (OCIEnginesTests): a line, never a failure. The build's
        // appd-oci is beside the build's appd, unless this host has one installed.
        let oci = text.stdout.split(separator: "\n").first { $0.hasPrefix("oci runtime: ") }
        #expect(oci != nil, "\(text.stdout)")
        let built = (appdExecutable as NSString).deletingLastPathComponent + "/appd-oci"
        if access(OCIEngines.installedRuntime, X_OK) != 0 {
            #expect(oci?.hasPrefix("oci runtime: \(built)") == true, "\(oci ?? "")")
        }
        #expect(object?["ociRuntime"] is [String: Any], "\(json.stdout)")
    }
}
