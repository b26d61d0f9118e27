import AppContainers
import AppdBase
import Foundation
import Glibc
import Sandbox
import TestSupport
import Testing

@testable import appd_oci

@Suite("appd-oci CPU limits: quota, period, shares and cpusets narrow")
struct CPULimitTests {
    static func resources(_ json: String) throws -> OCISpec.Resources {
        try JSONDecoder().decode(OCISpec.Resources.self, from: Data(json.utf8))
    }

    @Test("linux.resources.cpu maps to the limits: exact shares for v1, runc's weight for v2")
    func mapped() throws {
        let limits = try OCIRuntime.limits(
            CgroupLimitsFixture.sandbox,
            by: Self.resources(
                #"{"cpu": {"shares": 2048, "quota": 50000, "period": 100000, "cpus": "0-1", "mems": "0"}}"#
            ), ceiling: .init())
        #expect(limits.cpuShares == 2048 && limits.cpuWeight == 79)
        #expect(limits.cpuQuota == 50000 && limits.cpuPeriod == 100_000)
        #expect(limits.cpusetCPUs == "0-1" && limits.cpusetMems == "0")
        #expect(limits.memoryMax == 512 << 20 && limits.pidsMax == 512)
        // The spec's "no quota" (-1), no period, empty sets: nothing asked.
        let none = try OCIRuntime.limits(
            CgroupLimitsFixture.sandbox,
            by: Self.resources(#"{"cpu": {"quota": -1, "period": 0, "cpus": "", "mems": ""}}"#),
            ceiling: .init())
        #expect(none == CgroupLimitsFixture.sandbox)
    }

    @Test(
        "a malformed cpuset or an out-of-range quota is refused at create, naming it",
        arguments: [
            (#"{"cpu": {"cpus": "0-x"}}"#, "cpuset cpus '0-x'"),
            (#"{"cpu": {"mems": "0;reboot"}}"#, "cpuset mems '0;reboot'"),
            (#"{"cpu": {"quota": 10}}"#, "cpu quota 10 microseconds"),
            (#"{"cpu": {"period": 5000000}}"#, "cpu period 5000000 microseconds"),
        ])
    func refused(json: String, named: String) throws {
        let asked = try Self.resources(json)
        #expect {
            try OCIRuntime.limits(CgroupLimitsFixture.sandbox, by: asked, ceiling: .init())
        } throws: { ($0 as? AppdError)?.message.contains(named) == true }
    }

    @Test("systemd's driver gets CPUQuotaPerSecUSec, CPUQuotaPeriodUSec and ay CPU bitmasks")
    func systemdProperties() {
        #expect(SystemdScope.cpuMask("0,2-3,9") == [0b0000_1101, 0b0000_0010])
        #expect(SystemdScope.cpuMask("0") == [1])
        #expect(SystemdScope.cpuMask("0-x") == nil)
        let limits = CgroupLimits(
            cpuQuota: 50000, cpuPeriod: 100_000, cpusetCPUs: "1", cpusetMems: "0")
        #expect(SystemdScope.quotaPerSecond(limits, 50000) == 500_000)
        // Rounded up to systemd's 10 ms per second, as runc does.
        #expect(SystemdScope.quotaPerSecond(CgroupLimits(), 33333) == 340_000)
        #expect(
            SystemdScope.limitProperties(limits) == [
                ["CPUQuotaPerSecUSec", "t", "500000"], ["CPUQuotaPeriodUSec", "t", "100000"],
                ["AllowedCPUs", "ay", "1", "2"], ["AllowedMemoryNodes", "ay", "1", "1"],
            ])
    }
}

/// A real container (`--plain`, busybox) with CPU limits and a one-component cgroupsPath:
/// read back from its cgroup on this host, then narrowed by `update`.
@Suite("appd-oci CPU limits on this host (root)", .serialized, rootOnly)
struct CPULimitRootTests {
    static func read(_ path: String) -> String {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "<missing>")
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A plain busybox container asking `cpu` (linux.resources.cpu) in the one-component
    /// cgroupsPath `/appd-cpu-ID`: `body` gets it, that cgroup's name and `create`'s result;
    /// then it is deleted and its folder removed, whatever the body did.
    static func create(
        cpu: [String: Any],
        _ body: (PlainContainerTests.Bundle, String, (code: Int32, stdout: String, stderr: String))
            throws -> Void
    ) throws {
        let bundle = try PlainContainerTests.Bundle()
        let name = "appd-cpu-\(bundle.id)"
        defer {
            _ = try? bundle.oci(["delete", "--force", bundle.id])
            bundle.remove()
        }
        try bundle.write(script: "busybox sleep 30") { config in
            var linux = config["linux"] as? [String: Any] ?? [:]
            linux["cgroupsPath"] = "/\(name)"
            linux["resources"] = ["cpu": cpu]
            config["linux"] = linux
        }
        try body(
            bundle, name,
            try bundle.oci(["create", "--bundle", bundle.bundle, bundle.id], detached: true))
    }

    @Test(
        "quota 50000/100000, shares 2048 and cpus 0 are in the container's own cgroup (/NAME, no level below); update narrows them; delete removes it"
    )
    func appliedAndUpdated() throws {
        try Self.create(
            cpu: ["shares": 2048, "quota": 50000, "period": 100_000, "cpus": "0", "mems": "0"]
        ) { bundle, name, created in
            #expect(created.code == 0, "\(created.stderr)")
            let unified = CgroupLayout.detect().mode == .unified
            let cpu = unified ? "/sys/fs/cgroup/\(name)" : "/sys/fs/cgroup/cpu/\(name)"
            let cpuset = unified ? cpu : "/sys/fs/cgroup/cpuset/\(name)"
            let record = try JSONSerialization.jsonObject(
                with: Data(
                    contentsOf: URL(fileURLWithPath: "\(bundle.state)/\(bundle.id)/state.json")))
            let pid = try #require((record as? [String: Any])?["pid"] as? Int32)
            #expect(Self.read("\(cpu)/cgroup.procs").split(separator: "\n").contains("\(pid)"))
            if unified {
                #expect(Self.read("\(cpu)/cpu.max") == "50000 100000")
            } else {
                #expect(Self.read("\(cpu)/cpu.cfs_quota_us") == "50000")
                #expect(Self.read("\(cpu)/cpu.cfs_period_us") == "100000")
                #expect(Self.read("\(cpu)/cpu.shares") == "2048")
            }
            #expect(Self.read("\(cpuset)/cpuset.cpus") == "0")
            #expect(Self.read("\(cpuset)/cpuset.mems") == "0")
            let allowed = Self.read("/proc/\(pid)/status").split(separator: "\n")
                .first { $0.hasPrefix("Cpus_allowed_list:") }
            #expect(allowed?.hasSuffix("\t0") == true, "\(allowed ?? "")")

            let updated = try bundle.oci(
                [
                    "update", "--cpu-quota", "20000", "--cpu-period", "50000", "--cpuset-cpus", "0",
                    bundle.id,
                ])
            #expect(updated.code == 0, "\(updated.stderr)")
            if unified {
                #expect(Self.read("\(cpu)/cpu.max") == "20000 50000")
            } else {
                #expect(Self.read("\(cpu)/cpu.cfs_quota_us") == "20000")
                #expect(Self.read("\(cpu)/cpu.cfs_period_us") == "50000")
            }
            let bad = try bundle.oci(["update", "--cpuset-cpus", "0-x", bundle.id])
            #expect(bad.code != 0 && bad.stderr.contains("cpuset cpus '0-x'"), "\(bad.stderr)")
            let notNumber = try bundle.oci(["update", "--cpu-quota", "half", bundle.id])
            #expect(
                notNumber.code != 0 && notNumber.stderr.contains("--cpu-quota 'half'"),
                "\(notNumber.stderr)")

            #expect(try bundle.oci(["delete", "--force", bundle.id]).code == 0)
            #expect(access(cpu, F_OK) != 0, "\(cpu) is still there")
            #expect(access(cpuset, F_OK) != 0, "\(cpuset) is still there")
        }
    }

    @Test(
        "a malformed cpuset in config.json is refused at create with one line naming it; nothing is left"
    )
    func malformedRefused() throws {
        try Self.create(cpu: ["cpus": "0-1;x"]) { bundle, name, created in
            #expect(created.code != 0)
            #expect(created.stderr.contains("cpuset cpus '0-1;x'"), "\(created.stderr)")
            for hierarchy in ["cpu", "cpuset", "pids", "memory", "unified", ""] {
                let path = "/sys/fs/cgroup/\(hierarchy.isEmpty ? "" : hierarchy + "/")\(name)"
                #expect(access(path, F_OK) != 0, "\(path) was made")
            }
            #expect(access("\(bundle.state)/\(bundle.id)", F_OK) != 0)
        }
    }
}
