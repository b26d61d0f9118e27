import AppdBase
import Foundation
import Testing

@testable import AppContainers

/// `appd doctor`'s line about which OCI engines call appd-oci: the three formats read as the
/// engines read them, checked against the example files the package ships (config/oci), and a
/// fake host tree.
@Suite("doctor: the OCI engines that know appd-oci")
struct OCIEnginesTests {
    static let examples = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
            "config/oci"
        ).path

    static func example(_ name: String) throws -> String {
        try String(contentsOfFile: "\(examples)/\(name)", encoding: .utf8)
    }

    @Test("the shipped containerd stanza names appd-oci as the runtime appd")
    func containerdExample() throws {
        let found = OCIEngines.containerdRuntimes(try Self.example("containerd-appd.toml"))
        #expect(found.map(\.name) == ["appd"])
        #expect(found.map(\.binary) == ["/usr/libexec/appd/appd-oci"])
    }

    @Test(
        "containerd: dotted keys count; comments, other binaries and other keys of a runtime do not"
    )
    func containerdSpellings() {
        let text = """
            version = 2
            [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
              BinaryName = "/usr/bin/runc"
            # [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.old.options]
            #   BinaryName = "/usr/libexec/appd/appd-oci"
            [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.fake.options]
              BinaryName = "/usr/bin/not-appd-oci"   # the file name must be appd-oci
              Root = "/usr/libexec/appd/appd-oci"
            [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.sandboxed]
              runtime_type = "io.containerd.runc.v2"
              options.BinaryName = '/opt/appd/appd-oci'
            [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes."app#d".options]
              BinaryName = "/usr/local/bin/appd-oci" # containerd 2's table name
            """
        let found = OCIEngines.containerdRuntimes(text)
        #expect(found.map(\.name) == ["runc", "fake", "sandboxed", "app#d"])
        #expect(
            found.filter { OCIEngines.names($0.binary) }.map(\.name) == ["sandboxed", "app#d"])
    }

    @Test("the shipped containers.conf names appd-oci and lists appd in runtime_supports_json")
    func containersConfExample() throws {
        let parsed = OCIEngines.containersConfRuntimes(try Self.example("containers.conf"))
        #expect(parsed.runtimes.map(\.name) == ["appd"])
        #expect(parsed.supportsJSON?.contains("appd") == true)
    }

    @Test("containers.conf: an array over several lines, and a runtime listing other paths")
    func containersConfSpellings() {
        let text = """
            [engine]
            runtime = "crun"
            [engine.runtimes]
            runc = ["/usr/bin/runc", "/usr/sbin/runc"]
            appd = [
              "/usr/local/libexec/appd/appd-oci",  # a build
              "/usr/libexec/appd/appd-oci",
            ]
            [network]
            appd = ["/usr/libexec/appd/appd-oci"]
            """
        let parsed = OCIEngines.containersConfRuntimes(text)
        #expect(parsed.runtimes.map(\.name) == ["appd", "appd"])
        #expect(
            parsed.runtimes.map(\.binary) == [
                "/usr/local/libexec/appd/appd-oci", "/usr/libexec/appd/appd-oci",
            ])
        #expect(parsed.supportsJSON == nil)
    }

    @Test("the shipped daemon.json names appd-oci; a malformed daemon.json is a note")
    func dockerExample() throws {
        let found = try OCIEngines.dockerRuntimes(try Self.example("daemon.json")).get()
        #expect(
            found.map(\.name) == ["appd"] && found.map(\.binary) == [OCIEngines.installedRuntime])
        #expect(throws: AppdError.self) {
            try OCIEngines.dockerRuntimes("{\"runtimes\": [1]}").get()
        }
        #expect(throws: AppdError.self) { try OCIEngines.dockerRuntimes("runtimes").get() }
        #expect(try OCIEngines.dockerRuntimes("{}").get().isEmpty)
    }

    /// A host tree with the example files in the engines' places.
    static func fakeHost(_ scratch: Scratch) throws -> String {
        let root = scratch.sub("host")
        let files: [(String, String)] = [
            ("etc/containerd/config.toml", try example("containerd-appd.toml")),
            ("etc/containers/containers.conf.d/appd.conf", try example("containers.conf")),
            ("usr/share/containers/containers.conf", "[engine]\nruntime = \"crun\"\n"),
            (
                "etc/docker/daemon.json",
                "{\"runtimes\": {\"runsc\": {\"path\": \"/usr/bin/runsc\"}}}"
            ),
            ("usr/libexec/appd/appd-oci", "#!/bin/sh\n"),
        ]
        for (path, text) in files {
            let full = "\(root)/\(path)"
            try FileManager.default.createDirectory(
                atPath: (full as NSString).deletingLastPathComponent,
                withIntermediateDirectories: true)
            try text.write(toFile: full, atomically: false, encoding: .utf8)
        }
        chmod("\(root)/usr/libexec/appd/appd-oci", 0o755)
        // A host where systemd runs (the example's SystemdCgroup = true then holds).
        try FileManager.default.createDirectory(
            atPath: "\(root)/run/systemd/system", withIntermediateDirectories: true)
        return root
    }

    @Test(
        "containerd: a table without org.appd.plain in its annotations, or SystemdCgroup = true where systemd does not run, is a note; the shipped example is neither"
    )
    func containerdTableNotes() throws {
        let shipped = try Self.example("containerd-appd.toml")
        #expect(OCIEngines.containerdNotes(shipped, names: ["appd"], systemdRunning: true) == [])
        let noSystemd = OCIEngines.containerdNotes(shipped, names: ["appd"], systemdRunning: false)
        #expect(noSystemd.count == 1 && noSystemd[0].contains("set SystemdCgroup = false"))
        let bare = """
            [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.appd]
              runtime_type = "io.containerd.runc.v2"
              pod_annotations = ["io.kubernetes.*"]
            [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.appd.options]
              BinaryName = "/usr/libexec/appd/appd-oci"
              SystemdCgroup = false
            """
        let notes = OCIEngines.containerdNotes(bare, names: ["appd"], systemdRunning: false)
        #expect(notes.count == 1 && notes[0].contains("passes no org.appd.plain"), "\(notes)")
        let wildcard = bare.replacingOccurrences(of: "io.kubernetes.*", with: "org.appd.*")
        #expect(OCIEngines.containerdNotes(wildcard, names: ["appd"], systemdRunning: false) == [])
    }

    @Test("a host with containerd and podman configured and docker not: each said so")
    func fakeHostTree() throws {
        let scratch = Scratch()
        let root = try Self.fakeHost(scratch)
        let result = OCIEngines.check(hostRoot: root)
        #expect(result.runtime == "\(root)/usr/libexec/appd/appd-oci")
        #expect(result.engines == ["containerd", "podman"])
        #expect(result.unconfigured == ["docker"])
        #expect(
            result.entries.map(\.file) == [
                "/etc/containerd/config.toml", "/etc/containers/containers.conf.d/appd.conf",
            ])
        #expect(result.notes.isEmpty, "\(result.notes)")

        // The binary gone, and podman's JSON list without appd: both are notes; the engines
        // still "know" the runtime by their configuration.
        unlink("\(root)/usr/libexec/appd/appd-oci")
        try "[engine.runtimes]\nappd = [\"/usr/libexec/appd/appd-oci\"]\n".write(
            toFile: "\(root)/etc/containers/containers.conf.d/appd.conf", atomically: false,
            encoding: .utf8)
        let gone = OCIEngines.check(hostRoot: root)
        #expect(gone.runtime == nil)
        #expect(gone.searched == ["\(root)/usr/libexec/appd/appd-oci"])
        #expect(gone.engines == ["containerd", "podman"])
        #expect(
            gone.notes.contains {
                $0.contains("containerd's runtime appd") && $0.contains("not an executable file")
            })
        #expect(gone.notes.contains { $0.contains("not in runtime_supports_json") })
    }

    @Test(
        "reads are bounded: a file over 1 MiB and a FIFO are notes, not read, and the check returns"
    )
    func boundedReads() throws {
        let scratch = Scratch()
        let root = try Self.fakeHost(scratch)
        let big = "\(root)/etc/containerd/config.toml"
        let line = "# padding\n"
        let text =
            try Self.example("containerd-appd.toml")
            + String(repeating: line, count: OCIEngines.maxFileBytes / line.utf8.count + 1)
        try text.write(toFile: big, atomically: false, encoding: .utf8)
        let fifo = "\(root)/etc/docker/daemon.json"
        unlink(fifo)
        #expect(mkfifo(fifo, 0o600) == 0)
        let started = Date()
        let result = OCIEngines.check(hostRoot: root)
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(result.engines == ["podman"])
        #expect(
            result.notes.contains {
                $0
                    == "/etc/containerd/config.toml: larger than \(OCIEngines.maxFileBytes) bytes, not read"
            }, "\(result.notes)")
        #expect(
            result.notes.contains { $0 == "/etc/docker/daemon.json: not a regular file" },
            "\(result.notes)")
    }

    @Test("a host with no engine configuration: nothing known, nothing unconfigured, no note")
    func emptyHost() throws {
        let scratch = Scratch()
        let result = OCIEngines.check(hostRoot: scratch.path, besideExecutable: scratch.path)
        #expect(result.runtime == nil && result.entries.isEmpty && result.unconfigured.isEmpty)
        #expect(result.notes.isEmpty)
        #expect(
            result.searched == [
                "\(scratch.path)/usr/libexec/appd/appd-oci", "\(scratch.path)/appd-oci",
            ])
    }
}
