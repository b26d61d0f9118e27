import AppContainers
import AppdBase
import Foundation
import Sandbox
import TestSupport
import Testing

@testable import AppdConfig
@testable import appd_oci

/// appd-oci's reading of what engines hand it, without root: the command line as the shim,
/// conmon and dockerd write it, the cgroup path each engine names, and the config check that
/// lets a config narrow the sandbox and never widen it. The engines themselves run in
/// scripts/oci-harness --appd (scripts/test).
@Suite("appd-oci: command line, cgroups, narrow never widen")
struct AppdOCITests {
    @Test("containerd's shim: global options before the command, --flag value and --flag=value")
    func shimCommandLine() throws {
        let line = try OCICommandLine.parse([
            "--root", "/run/containerd/runc/k8s.io", "--log", "/b/log.json", "--log-format", "json",
            "--systemd-cgroup", "create", "--bundle=/b", "--pid-file", "/b/init.pid",
            "--console-socket", "/tmp/s.sock", "abc",
        ])
        #expect(line.root == "/run/containerd/runc/k8s.io")
        #expect(line.log == "/b/log.json" && line.logFormat == "json" && line.systemdCgroup)
        #expect(line.command == "create" && line.operands == ["abc"])
        #expect(line.options["bundle"] == "/b" && line.options["pid-file"] == "/b/init.pid")
        #expect(line.options["console-socket"] == "/tmp/s.sock")
        #expect(try line.id() == "abc")
    }

    @Test("exec: the operands after the id are the process's, options of runc's kept apart")
    func execCommandLine() throws {
        let line = try OCICommandLine.parse([
            "exec", "-t", "--env", "A=1", "-e", "B=2", "--cwd", "/x", "abc", "sh", "-c", "echo -n",
        ])
        #expect(line.flag("tty"))
        #expect(line.options["env"] == "A=1\nB=2" && line.options["cwd"] == "/x")
        #expect(line.operands == ["abc", "sh", "-c", "echo -n"])
    }

    @Test("harmless unknown options are accepted; an unknown command and a bad id are refused")
    func refusals() throws {
        let line = try OCICommandLine.parse(["--debug", "--criu", "x", "delete", "--force", "a"])
        #expect(line.command == "delete" && line.flag("force"))
        #expect(throws: AppdError.self) { try OCICommandLine.parse(["frobnicate", "a"]) }
        #expect(throws: AppdError.self) { try OCICommandLine.parse(["state", "../x"]).id() }
        #expect(throws: AppdError.self) { try StateRoot.validate("a/b") }
        #expect(throws: AppdError.self) {
            try StateRoot.validate(String(repeating: "a", count: 1025))
        }
        #expect(throws: AppdError.self) { try OCICommandLine.parse(["--root"]) }
    }

    @Test("signals by name, with or without SIG, and by number; unknown refused")
    func signals() throws {
        #expect(try OCIRuntime.signal("TERM") == SIGTERM)
        #expect(try OCIRuntime.signal("SIGKILL") == SIGKILL)
        #expect(try OCIRuntime.signal("9") == 9)
        #expect(throws: AppdError.self) { try OCIRuntime.signal("SIGNOPE") }
        #expect(throws: AppdError.self) { try OCIRuntime.signal("99") }
    }

    @Test(
        "cgroupsPath: podman's, containerd's, one component, an empty one, and systemd's slice:prefix:name expanded"
    )
    func cgroupPaths() throws {
        let podman = try OCIRuntime.cgroupPlace(
            "/libpod_parent/libpod-abc", id: "abc", systemd: false)
        #expect(
            podman.parent == "/" && podman.app == "libpod_parent" && podman.instance == "libpod-abc"
        )
        let deep = try OCIRuntime.cgroupPlace("/k8s.io/pod1/ctr1", id: "ctr1", systemd: false)
        #expect(deep.parent == "/k8s.io" && deep.app == "pod1" && deep.instance == "ctr1")
        // One component: the container's cgroup itself, as runc places it (no app level).
        let single = try OCIRuntime.cgroupPlace("/cgrouptest", id: "x1", systemd: false)
        #expect(single.parent == "/" && single.app == "" && single.instance == "cgrouptest")
        let empty = try OCIRuntime.cgroupPlace("", id: "x1", systemd: false)
        #expect(empty.parent == "/" && empty.app == "appd-oci" && empty.instance == "x1")
        let systemd = try OCIRuntime.cgroupPlace(
            "kubepods-besteffort-pod1.slice:cri-containerd:abc", id: "abc", systemd: true)
        #expect(systemd.parent == "/kubepods.slice/kubepods-besteffort.slice")
        #expect(systemd.app == "kubepods-besteffort-pod1.slice")
        #expect(systemd.instance == "cri-containerd-abc.scope")
        let machine = try OCIRuntime.cgroupPlace(
            "machine.slice:libpod:abc", id: "abc", systemd: true)
        #expect(machine.parent == "/" && machine.app == "machine.slice")
        #expect(machine.instance == "libpod-abc.scope")
    }

    @Test(
        "limits: the engine's are applied as set, above the sandbox's too; a node ceiling refuses more, naming its key"
    )
    func limits() throws {
        let sandbox = CgroupLimitsFixture.sandbox
        var resources = OCISpec.Resources()
        resources.memory = .init(limit: 768 << 20)
        resources.pids = .init(limit: 10_000)
        let raised = try OCIRuntime.limits(sandbox, by: resources, ceiling: .init())
        #expect(raised.memoryMax == 768 << 20 && raised.pidsMax == 10_000)
        resources.memory = .init(limit: 64 << 20)
        resources.pids = .init(limit: 10)
        let lowered = try OCIRuntime.limits(sandbox, by: resources, ceiling: .init())
        #expect(lowered.memoryMax == 64 << 20 && lowered.pidsMax == 10)
        // No limit asked: the sandbox's, capped by a ceiling.
        let none = try OCIRuntime.limits(sandbox, by: nil, ceiling: .init())
        #expect(none.memoryMax == 512 << 20 && none.pidsMax == 512)
        var ceiling = OCISettings()
        ceiling.memoryMax = 256 << 20
        ceiling.tasksMax = 100
        let capped = try OCIRuntime.limits(sandbox, by: nil, ceiling: ceiling)
        #expect(capped.memoryMax == 256 << 20 && capped.pidsMax == 100)
        resources.memory = .init(limit: 1 << 30)
        do {
            _ = try OCIRuntime.limits(sandbox, by: resources, ceiling: ceiling)
            Issue.record("a memory limit above [OCI] MemoryMax was accepted")
        } catch let error as AppdError {
            #expect(error.message.contains("[OCI] MemoryMax=268435456"), "\(error.message)")
        }
        resources.memory = nil
        resources.pids = .init(limit: 101)
        do {
            _ = try OCIRuntime.limits(sandbox, by: resources, ceiling: ceiling)
            Issue.record("a pids limit above [OCI] TasksMax was accepted")
        } catch let error as AppdError {
            #expect(error.message.contains("[OCI] TasksMax=100"), "\(error.message)")
        }
        #expect(OCIRuntime.bytes("64m") == 64 << 20 && OCIRuntime.bytes("1g") == 1 << 30)
        #expect(OCIRuntime.bytes("9999999999999999g") == nil)
    }

    static func spec(_ json: String) throws -> OCISpec {
        try JSONDecoder().decode(OCISpec.self, from: Data(json.utf8))
    }

    static let namespaces =
        #"[{"type":"pid"},{"type":"ipc"},{"type":"uts"},{"type":"mount"},{"type":"network"}]"#

    @Test(
        "what engines always pass is accepted: default capabilities, their mounts, docker's sysctls"
    )
    func engineDefaultsAccepted() throws {
        let spec = try Self.spec(
            #"""
            {"process": {"capabilities": {"bounding": ["CAP_CHOWN", "CAP_KILL", "CAP_NET_BIND_SERVICE"]}},
             "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
                        {"destination": "/etc/hosts", "type": "bind", "source": "/var/x/hosts", "options": ["rbind", "rw"]},
                        {"destination": "/dev/termination-log", "type": "bind", "source": "/var/y", "options": ["rbind"]},
                        {"destination": "/var/run/secrets/kubernetes.io/serviceaccount", "type": "bind", "source": "/var/z", "options": ["rbind", "ro"]},
                        {"destination": "/appd/data", "type": "bind", "source": "/var/vol", "options": ["rbind", "rw"]}],
             "linux": {"namespaces": \#(Self.namespaces),
                       "sysctl": {"net.ipv4.ip_unprivileged_port_start": "0"},
                       "devices": [{"path": "/dev/null"}]}}
            """#)
        try OCIConfigCheck.check(spec)
    }

    @Test(
        "widening refused, naming what: capabilities, devices, host namespaces, host folders, sysctls, uid maps",
        arguments: [
            (
                #"{"process": {"capabilities": {"bounding": ["CAP_SYS_ADMIN"]}}, "linux": {"namespaces": NS}}"#,
                "CAP_SYS_ADMIN"
            ),
            (#"{"linux": {"namespaces": NS, "devices": [{"path": "/dev/kvm"}]}}"#, "/dev/kvm"),
            (
                #"{"linux": {"namespaces": [{"type":"pid"},{"type":"ipc"},{"type":"uts"},{"type":"mount"}]}}"#,
                "network"
            ),
            (
                #"{"mounts": [{"destination": "/data", "type": "bind", "source": "/etc", "options": ["ro"]}], "linux": {"namespaces": NS}}"#,
                "/etc"
            ),
            (
                #"{"linux": {"namespaces": NS, "sysctl": {"kernel.shm_rmid_forced": "1"}}}"#,
                "kernel.shm_rmid_forced"
            ),
            (
                #"{"linux": {"namespaces": NS, "uidMappings": [{"containerID": 0, "hostID": 0, "size": 1}]}}"#,
                "uid mappings"
            ),
            (
                #"{"linux": {"namespaces": [{"type":"pid"},{"type":"ipc"},{"type":"uts"},{"type":"mount"},{"type":"network","path":"/proc/self/ns/net"}]}}"#,
                "network namespace"
            ),
        ])
    func wideningRefused(json: String, named: String) throws {
        let spec = try Self.spec(json.replacingOccurrences(of: "NS", with: Self.namespaces))
        #expect {
            try OCIConfigCheck.check(spec)
        } throws: { error in
            let message = (error as? AppdError)?.message ?? ""
            return message.contains(named) && message.contains("widen the sandbox")
        }
    }

    @Test("the config's environment adds what the sandbox does not set, never LD_*")
    func environment() {
        let extra = OCIRuntime.extraEnvironment(
            ["PATH=/x", "TERM=xterm", "LD_PRELOAD=/evil.so", "A=1", "A=2", "novalue"],
            reserved: ["PATH", "HOME"])
        #expect(extra.map(\.name) == ["TERM", "A"])
        #expect(extra.last?.value == "1")
    }

    @Test("the pod sandbox containers the engines mark run plain; others only with the opt-in")
    func plainAnnotations() {
        #expect(OCIRuntime.isPlain(["io.kubernetes.cri.container-type": "sandbox"]))
        #expect(OCIRuntime.isPlain(["org.appd.plain": "true"]))
        #expect(!OCIRuntime.isPlain(["io.kubernetes.cri.container-type": "container"]))
        #expect(!OCIRuntime.isPlain(["org.appd.plain": "yes please"]))
    }
}

enum CgroupLimitsFixture {
    static let sandbox = CgroupLimits(memoryMax: 512 << 20, pidsMax: 512)
}

/// appd-oci run as the engines run it, on bundles that need no root to refuse: what it prints
/// when the image or the config is hostile.
@Suite("appd-oci: hostile images and configs refused, one clear line")
struct AppdOCIRefusalTests {
    struct Outcome {
        var status: Int32
        var stderr: String
        var log: String
    }

    /// Runs `appd-oci --log L --log-format json create --bundle B ID` on a bundle with `files`
    /// under its rootfs and `config` as config.json.
    static func create(config: String, rootfs make: (String) throws -> Void) throws -> Outcome {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "appd-oci-test-\(UUID().uuidString)"
        ).path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(
            atPath: "\(directory)/bundle/rootfs", withIntermediateDirectories: true)
        try make("\(directory)/bundle/rootfs")
        try config.write(
            toFile: "\(directory)/bundle/config.json", atomically: true, encoding: .utf8)
        try "".write(toFile: "\(directory)/none.conf", atomically: true, encoding: .utf8)
        let result = try ChildProcess(
            "appd-oci",
            [
                "--root", "\(directory)/state", "--log", "\(directory)/log.json", "--log-format",
                "json", "--config", "\(directory)/none.conf", "create", "--bundle",
                "\(directory)/bundle", "c1",
            ], stdout: .discard, stderr: .capture
        ).finish()
        let log = (try? String(contentsOfFile: "\(directory)/log.json", encoding: .utf8)) ?? ""
        #expect(
            !FileManager.default.fileExists(atPath: "\(directory)/state/c1"), "state left behind")
        return Outcome(status: result.code, stderr: result.stderr, log: log)
    }

    static let config = """
        {"ociVersion": "1.0.2", "root": {"path": "rootfs"}, "process": {"args": ["/Evil.app/Evil"]},
         "linux": {"namespaces": \(AppdOCITests.namespaces)}}
        """

    @Test(
        "a bundle named with terminal escapes: refused, the escapes shown as \\u{..}, one JSON log line"
    )
    func escapesShown() throws {
        let outcome = try Self.create(config: Self.config) { rootfs in
            try FileManager.default.createDirectory(
                atPath: "\(rootfs)/E\u{1b}[2J\u{202e}vil.app", withIntermediateDirectories: true)
        }
        #expect(outcome.status == 1)
        #expect(!outcome.stderr.contains("\u{1b}") && !outcome.stderr.contains("\u{202e}"))
        #expect(outcome.stderr.contains("E\\u{1b}[2J\\u{202e}vil.app"), "\(outcome.stderr)")
        let lines = outcome.log.split(separator: "\n")
        #expect(lines.count == 1, "\(outcome.log)")
        let object = try JSONSerialization.jsonObject(with: Data((lines.first ?? "").utf8))
        #expect((object as? [String: Any])?["level"] as? String == "error")
    }

    @Test("an image without a .app is refused unless run plain; a symlinked Name.app is not one")
    func noBundle() throws {
        let outcome = try Self.create(config: Self.config) { rootfs in
            try FileManager.default.createSymbolicLink(
                atPath: "\(rootfs)/Evil.app", withDestinationPath: "/usr")
        }
        #expect(outcome.status == 1)
        #expect(
            outcome.stderr.contains("the image holds no Name.app at its root"), "\(outcome.stderr)")
    }

    @Test("a config that is not JSON, or nested 200,000 deep, is refused without a crash")
    func badConfig() throws {
        for config in [
            "\u{ff}{",
            "{\"x\": " + String(repeating: "[", count: 200_000)
                + String(repeating: "]", count: 200_000) + "}",
        ] {
            let outcome = try Self.create(config: config) { _ in }
            #expect(outcome.status == 1)
            #expect(outcome.stderr.contains("is not a valid OCI config"), "\(outcome.stderr)")
        }
    }

    @Test("a privileged config is refused before the image is read")
    func privileged() throws {
        let config = """
            {"root": {"path": "rootfs"}, "process": {"args": ["/x"], "capabilities":
             {"bounding": ["CAP_SYS_ADMIN", "CAP_SYS_MODULE"]}}, "linux": {"namespaces": \(AppdOCITests.namespaces)}}
            """
        let outcome = try Self.create(config: config) { _ in }
        #expect(outcome.status == 1)
        #expect(outcome.stderr.contains("CAP_SYS_ADMIN, CAP_SYS_MODULE"), "\(outcome.stderr)")
    }
}
