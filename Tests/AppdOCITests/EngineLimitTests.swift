import Foundation
import Glibc
import Sandbox
import TestSupport
import Testing

/// The engine's limits are the container's (docs/oci-runtime.md, "Limits"): a real container
/// created as an engine creates it, with a memory and pids limit above `[Sandbox]`'s defaults
/// (512 MiB, 512), read back from its cgroup; `update` raises and lowers them; a node ceiling
/// in `[OCI]` refuses more, naming the key.
@Suite("appd-oci: the engine's memory and pids limits, applied as set", .serialized, rootOnly)
struct EngineLimitTests {
    static func read(_ path: String) -> String {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "<missing>")
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The memory and pids limit files of the cgroup `/NAME` on this host's layout.
    static func limitFiles(_ name: String) -> (memory: String, pids: String) {
        if CgroupLayout.detect().mode == .unified {
            return ("/sys/fs/cgroup/\(name)/memory.max", "/sys/fs/cgroup/\(name)/pids.max")
        }
        return (
            "/sys/fs/cgroup/memory/\(name)/memory.limit_in_bytes",
            "/sys/fs/cgroup/pids/\(name)/pids.max"
        )
    }

    static func create(
        memory: Int64?, pids: Int, conf: String = "",
        _ body: (PlainContainerTests.Bundle, String, (code: Int32, stdout: String, stderr: String))
            throws -> Void
    ) throws {
        var bundle = try PlainContainerTests.Bundle()
        bundle.appdConfiguration = conf
        let name = "appd-limits-\(bundle.id)"
        defer {
            _ = try? bundle.oci(["delete", "--force", bundle.id])
            bundle.remove()
        }
        try bundle.write(script: "busybox sleep 30") { config in
            var linux = config["linux"] as? [String: Any] ?? [:]
            linux["cgroupsPath"] = "/\(name)"
            var resources: [String: Any] = ["pids": ["limit": pids]]
            if let memory { resources["memory"] = ["limit": memory] }
            linux["resources"] = resources
            config["linux"] = linux
        }
        try body(
            bundle, name,
            try bundle.oci(["create", "--bundle", bundle.bundle, bundle.id], detached: true))
    }

    @Test(
        "768 MiB and 2000 pids, above the sandbox's defaults, are the cgroup's; update raises and lowers"
    )
    func appliedAsSet() throws {
        try Self.create(memory: 768 << 20, pids: 2000) { bundle, name, created in
            #expect(created.code == 0, "\(created.stderr)")
            let files = Self.limitFiles(name)
            #expect(Self.read(files.memory) == "\(768 << 20)")
            #expect(Self.read(files.pids) == "2000")
            let raised = try bundle.oci(
                ["update", "--memory", "1g", "--pids-limit", "4000", bundle.id])
            #expect(raised.code == 0, "\(raised.stderr)")
            #expect(Self.read(files.memory) == "\(1 << 30)")
            #expect(Self.read(files.pids) == "4000")
            let lowered = try bundle.oci(["update", "--memory", "600m", bundle.id])
            #expect(lowered.code == 0, "\(lowered.stderr)")
            #expect(Self.read(files.memory) == "\(600 << 20)")
            // And up again past where it started: the record holds the limit in force.
            let again = try bundle.oci(["update", "--memory", "900m", bundle.id])
            #expect(again.code == 0, "\(again.stderr)")
            #expect(Self.read(files.memory) == "\(900 << 20)")
        }
    }

    @Test(
        "a plain container the engine gives no memory limit has none, as under runc (not [Sandbox]'s 512 MiB); [OCI] MemoryMax still caps it"
    )
    func noMemoryLimitAsked() throws {
        try Self.create(memory: nil, pids: 100) { _, name, created in
            #expect(created.code == 0, "\(created.stderr)")
            let memory = Self.read(Self.limitFiles(name).memory)
            // v2 "max"; v1 the page-rounded LONG_MAX.
            #expect(memory == "max" || (Int64(memory) ?? 0) > 1 << 60, "\(memory)")
        }
        try Self.create(memory: nil, pids: 100, conf: "[OCI]\nMemoryMax=1G\n") { _, name, created in
            #expect(created.code == 0, "\(created.stderr)")
            #expect(Self.read(Self.limitFiles(name).memory) == "\(1 << 30)")
        }
    }

    @Test("[OCI] MemoryMax: a config above it is refused at create naming the key, nothing left")
    func ceilingRefusesAtCreate() throws {
        try Self.create(memory: 2 << 30, pids: 100, conf: "[OCI]\nMemoryMax=1G\n") {
            bundle, name, created in
            #expect(created.code != 0)
            #expect(
                created.stderr.contains("above the node's ceiling [OCI] MemoryMax=1073741824"),
                "\(created.stderr)")
            for hierarchy in ["memory", "pids", "cpu", "unified", ""] {
                let path = "/sys/fs/cgroup/\(hierarchy.isEmpty ? "" : hierarchy + "/")\(name)"
                #expect(access(path, F_OK) != 0, "\(path) was left")
            }
            #expect(access("\(bundle.state)/\(bundle.id)", F_OK) != 0)
        }
    }

    @Test("[OCI] TasksMax: update within it applies, above it is refused naming the key")
    func ceilingBoundsUpdate() throws {
        try Self.create(memory: 64 << 20, pids: 100, conf: "[OCI]\nTasksMax=200\n") {
            bundle, name, created in
            #expect(created.code == 0, "\(created.stderr)")
            let files = Self.limitFiles(name)
            #expect(try bundle.oci(["update", "--pids-limit", "200", bundle.id]).code == 0)
            #expect(Self.read(files.pids) == "200")
            let above = try bundle.oci(["update", "--pids-limit", "201", bundle.id])
            #expect(
                above.code != 0 && above.stderr.contains("[OCI] TasksMax=200"), "\(above.stderr)")
            #expect(Self.read(files.pids) == "200")
        }
    }

    @Test(
        "a systemd cgroupsPath on a node without systemd: one line saying what to change, no slice folders left",
        .enabled(if: access("/run/systemd/system", F_OK) != 0, "systemd runs here"))
    func systemdPathWithoutSystemd() throws {
        let bundle = try PlainContainerTests.Bundle()
        defer {
            _ = try? bundle.oci(["delete", "--force", bundle.id])
            bundle.remove()
        }
        let slice = "appdnosystemd\(bundle.id.suffix(8)).slice"
        try bundle.write(script: "true") { config in
            var linux = config["linux"] as? [String: Any] ?? [:]
            linux["cgroupsPath"] = "\(slice):appd-oci:\(bundle.id)"
            config["linux"] = linux
        }
        let created = try bundle.oci(
            ["--systemd-cgroup", "create", "--bundle", bundle.bundle, bundle.id], detached: true)
        #expect(created.code != 0)
        #expect(
            created.stderr.contains("systemd is not running on this node")
                && created.stderr.contains("SystemdCgroup = false"), "\(created.stderr)")
        #expect(created.stderr.split(separator: "\n").count == 1, "\(created.stderr)")
        for hierarchy in ["memory", "pids", "cpu", "cpuacct", "unified"] {
            let path = "/sys/fs/cgroup/\(hierarchy)/\(slice)"
            #expect(access(path, F_OK) != 0, "\(path) was left")
        }
        #expect(access("\(bundle.state)/\(bundle.id)", F_OK) != 0)
    }
}
