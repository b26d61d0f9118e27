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

    @Test(
        "--containerd-config, --podman-config, --docker-config: the files given are read instead of the default places; a cgroup driver this host lacks, or a file given that is not there, needs attention"
    )
    func engineConfigPaths() throws {
        let scratch = Scratch()
        let keys = scratch.sub("keys")
        try FileManager.default.createDirectory(atPath: keys, withIntermediateDirectories: true)
        #expect(try runAppd(["keygen", "--out", keys, "--name", "fleet"]).status == 0)
        let conf = scratch.sub("appd.conf")
        try "[Signer fleet]\nKey=\(keys)/fleet.public-key\nBundleIDs=com.example.*\n"
            .write(toFile: conf, atomically: true, encoding: .utf8)
        // This host runs no systemd (the test needs that: a systemd driver cannot work here).
        guard access("/run/systemd/system", F_OK) != 0 else { return }
        let containerd = scratch.sub("k3s-config.toml")
        let podman = scratch.sub("podman.d")
        let docker = scratch.sub("daemon.json")
        try FileManager.default.createDirectory(atPath: podman, withIntermediateDirectories: true)
        func write(systemd: Bool) throws {
            try """
            [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.appd]
              runtime_type = "io.containerd.runc.v2"
              pod_annotations = ["io.kubernetes.*"]
            [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.appd.options]
              BinaryName = "/usr/libexec/appd/appd-oci"
              SystemdCgroup = \(systemd)
            """.write(toFile: containerd, atomically: true, encoding: .utf8)
            try """
            [engine]
            cgroup_manager = "\(systemd ? "systemd" : "cgroupfs")"
            runtime_supports_json = ["appd"]
            [engine.runtimes]
            appd = ["/usr/libexec/appd/appd-oci"]
            """.write(toFile: "\(podman)/10-appd.conf", atomically: true, encoding: .utf8)
            try #"{"runtimes": {"appd": {"path": "/usr/libexec/appd/appd-oci"}}}"#.write(
                toFile: docker, atomically: true, encoding: .utf8)
        }
        let given = [
            "--containerd-config", containerd, "--podman-config", podman, "--docker-config",
            docker,
        ]
        try write(systemd: true)
        let broken = try runAppd(["doctor", "--oci", "--config", conf] + given)
        #expect(broken.status == 1, "\(broken.stdout)")
        #expect(
            broken.stdout.contains("known to containerd as appd, podman as appd, docker as appd"),
            "\(broken.stdout)")
        #expect(
            broken.stdout.contains(
                "NEEDS ATTENTION: containerd: runtime appd has SystemdCgroup = true but systemd is not running here"
            ), "\(broken.stdout)")
        #expect(
            broken.stdout.contains(
                "NEEDS ATTENTION: podman: \(podman)/10-appd.conf sets cgroup_manager = \"systemd\""),
            "\(broken.stdout)")
        // Said once, as needing attention, not again as a note.
        #expect(broken.stdout.components(separatedBy: "SystemdCgroup = true but").count == 2)
        // The missing annotation is a note: sidecars cannot run plain, apps still run.
        #expect(broken.stdout.contains("    containerd: runtime appd passes no org.appd.plain"))

        try write(systemd: false)
        let fixed = try runAppd(["doctor", "--oci", "--config", conf] + given)
        #expect(fixed.status == 0, "\(fixed.stdout)")
        #expect(!fixed.stdout.contains("NEEDS ATTENTION"), "\(fixed.stdout)")

        let missing = try runAppd(
            ["doctor", "--oci", "--config", conf, "--containerd-config", scratch.sub("nope.toml")])
        #expect(missing.status == 1, "\(missing.stdout)")
        #expect(
            missing.stdout.contains("NEEDS ATTENTION: \(scratch.sub("nope.toml")) (given): absent"),
            "\(missing.stdout)")
    }
}
