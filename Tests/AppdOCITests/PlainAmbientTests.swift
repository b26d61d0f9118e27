import Foundation
import Glibc
import TestSupport
import Testing

/// `runc spec`'s default config lists ambient capabilities but no inheritable set: the kernel
/// refuses to raise them, and runc starts the container with a warning. appd-oci --plain does
/// the same (issue 37: it failed at exec, "cannot raise ambient capability 5 (EPERM)").
@Suite("appd-oci --plain: runc spec's capabilities", .serialized, rootOnly)
struct PlainAmbientTests {
    static let runcDefault = ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]

    @Test("ambient capabilities without an inheritable set: the container runs, none raised")
    func runcSpecDefault() throws {
        let bundle = try PlainContainerTests.Bundle()
        defer { bundle.remove() }
        try bundle.write(script: "busybox grep -E 'CapAmb|CapEff' /proc/self/status") { config in
            var process = config["process"] as? [String: Any] ?? [:]
            process["capabilities"] = [
                "bounding": Self.runcDefault, "effective": Self.runcDefault,
                "permitted": Self.runcDefault, "ambient": Self.runcDefault,
            ]
            config["process"] = process
        }
        let log = "\(bundle.directory)/oci.log"
        let result = try bundle.oci(["--log", log, "run", "--bundle", bundle.bundle, bundle.id])
        #expect(result.code == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("CapAmb:\t0000000000000000"), "\(result.stdout)")
        // CAP_AUDIT_WRITE 29, CAP_KILL 5, CAP_NET_BIND_SERVICE 10: effective as listed.
        #expect(result.stdout.contains("CapEff:\t0000000020000420"), "\(result.stdout)")
        let warnings = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(
            warnings.contains(
                "warning: not raising ambient capabilities outside the permitted and inheritable sets: CAP_AUDIT_WRITE, CAP_KILL, CAP_NET_BIND_SERVICE"
            ), "\(warnings)")
    }

    @Test("ambient capabilities also in the inheritable set are raised")
    func raisedWhenInheritable() throws {
        let bundle = try PlainContainerTests.Bundle()
        defer { bundle.remove() }
        try bundle.write(script: "busybox grep CapAmb /proc/self/status") { config in
            var process = config["process"] as? [String: Any] ?? [:]
            process["capabilities"] = [
                "bounding": Self.runcDefault, "effective": Self.runcDefault,
                "permitted": Self.runcDefault, "inheritable": ["CAP_KILL"],
                "ambient": ["CAP_KILL"],
            ]
            config["process"] = process
        }
        let result = try bundle.oci(["run", "--bundle", bundle.bundle, bundle.id])
        #expect(result.code == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("CapAmb:\t0000000000000020"), "\(result.stdout)")
    }
}
