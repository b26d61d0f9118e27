import AppdBase
import Foundation
import Testing

@testable import Sandbox

@Suite("cgroup CPU limits: bandwidth, exact v1 shares, cpusets")
struct CgroupCPUTests {
    @Test("quota, period, shares and cpusets map to v2's cpu.max/cpuset.* and v1's files")
    func limitFiles() {
        let limits = CgroupLimits(
            cpuWeight: 79, cpuShares: 2048, cpuQuota: 50000, cpuPeriod: 100_000,
            cpusetCPUs: "0", cpusetMems: "0")
        #expect(
            UnifiedCgroups.limitFiles(limits).map { "\($0.file)=\($0.value)" } == [
                "cpu.weight=79", "cpu.max=50000 100000", "cpuset.cpus=0", "cpuset.mems=0",
            ])
        // v1: the shares asked, not 79 * 1024 / 100 = 808; the period before the quota.
        #expect(
            HybridCgroups.limitFiles(limits).map { "\($0.controller):\($0.file)=\($0.value)" } == [
                "cpu:cpu.shares=2048", "cpu:cpu.cfs_period_us=100000",
                "cpu:cpu.cfs_quota_us=50000", "cpuset:cpuset.cpus=0", "cpuset:cpuset.mems=0",
            ])
        #expect(
            UnifiedCgroups.limitFiles(CgroupLimits(cpuPeriod: 20000)).map(\.value) == [
                "max 20000"
            ])
        #expect(UnifiedCgroups.limitFiles(CgroupLimits(cpuQuota: 7000)).map(\.value) == ["7000"])
        // Without exact shares v1 still converts the weight.
        #expect(
            HybridCgroups.limitFiles(CgroupLimits(cpuWeight: 100)).map(\.value) == ["1024"])
    }

    @Test(
        "a CPU list is N or N-M items separated by commas, digits only; anything else is refused naming it",
        arguments: [
            ("", "it is empty"), ("0-", "'' is not a number"), ("a", "'a' is not a number"),
            ("3-1", "ends below its start"), ("0,,1", "'' is not a number"),
            ("0 1", "'0 1' is not a number"), ("-1", "'' is not a number"),
            ("0-1-2", "is not N or N-M"), ("65536", "is not a number from 0 to 65535"),
            ("0x1", "'0x1' is not a number"), ("1\n", "is not a number"),
            (String(repeating: "1,", count: 600) + "1", "longer than 1024 bytes"),
        ])
    func badCPUList(list: String, why: String) {
        #expect {
            try Cgroups.validateCPUList(list, "cpuset cpus")
        } throws: { error in
            let message = (error as? AppdError)?.message ?? ""
            return (error as? AppdError)?.code == .invalidConfig
                && message.hasPrefix("cpuset cpus '") && message.contains(why)
        }
    }

    @Test("CPU lists the kernel writes are accepted")
    func goodCPUList() throws {
        for list in ["0", "0-1", "0,2-3,7", "0-65535", "12"] {
            try Cgroups.validateCPUList(list, "cpuset mems")
        }
    }

    @Test("out-of-range CPU values are refused, each naming its value")
    func badValues() {
        let cases: [(CgroupLimits, String)] = [
            (CgroupLimits(cpuShares: 1), "cpu shares 1"),
            (CgroupLimits(cpuShares: 262_145), "cpu shares 262145"),
            (CgroupLimits(cpuQuota: 999), "cpu quota 999"),
            (CgroupLimits(cpuQuota: 1 << 44), "cpu quota 17592186044416"),
            (CgroupLimits(cpuPeriod: 999), "cpu period 999"),
            (CgroupLimits(cpuPeriod: 1_000_001), "cpu period 1000001"),
            (CgroupLimits(cpusetCPUs: "0-x"), "cpuset cpus '0-x'"),
            (CgroupLimits(cpusetMems: "0;1"), "cpuset mems '0;1'"),
        ]
        for (limits, named) in cases {
            #expect(
                performing: { try limits.validate() },
                throws: { error in
                    (error as? AppdError)?.message.contains(named) == true
                })
        }
    }

    @Test(
        "cgroup v2: a cpuset asked below an engine's parent that lacks it enables cpuset at each level above, or names the level that cannot"
    )
    func unifiedEnablesCpuset() throws {
        let root = NSTemporaryDirectory() + "appd-cpuset-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        func cgroup(_ path: String, controllers: String, enabled: String) throws {
            try FileManager.default.createDirectory(
                atPath: root + path, withIntermediateDirectories: true)
            try controllers.write(
                toFile: root + path + "/cgroup.controllers", atomically: false, encoding: .utf8)
            try enabled.write(
                toFile: root + path + "/cgroup.subtree_control", atomically: false,
                encoding: .utf8)
        }
        func enabled(_ path: String) throws -> String {
            try String(contentsOfFile: root + path + "/cgroup.subtree_control", encoding: .utf8)
        }
        try cgroup("", controllers: "cpuset cpu memory pids\n", enabled: "")
        try cgroup("/machine.slice", controllers: "cpuset cpu\n", enabled: "cpu\n")
        try cgroup("/machine.slice/ctr", controllers: "", enabled: "")
        let layout = CgroupLayout(
            mode: .unified,
            unified: .init(version: 2, controllers: ["cpuset", "cpu"], mountPoint: root),
            v1: [])
        var settings = CgroupSettings(parent: "/")
        settings.parentMayBeRoot = true
        let driver = try UnifiedCgroups(layout: layout, settings: settings)
        try driver.enableCpuset(above: CgroupDirectory(root + "/machine.slice/ctr"))
        #expect(try enabled("") == "+cpuset")
        #expect(try enabled("/machine.slice") == "+cpuset")
        #expect(try enabled("/machine.slice/ctr") == "", "the instance's own level is not touched")

        // A level whose parent does not hand it cpuset: the error names it.
        try cgroup("/other.slice", controllers: "cpu\n", enabled: "")
        try cgroup("/other.slice/ctr", controllers: "", enabled: "")
        #expect(
            performing: {
                try driver.enableCpuset(above: CgroupDirectory(root + "/other.slice/ctr"))
            },
            throws: { error in
                (error as? AppdError)?.message
                    == "cannot limit cpuset: \(root)/other.slice does not offer the controller"
            })
        // An instance that already has cpuset.cpus needs nothing.
        try "".write(
            toFile: root + "/other.slice/ctr/cpuset.cpus", atomically: false, encoding: .utf8)
        try driver.enableCpuset(above: CgroupDirectory(root + "/other.slice/ctr"))
    }
}

@Suite("cgroup CPU limits on this host (root)", .serialized, rootOnly)
struct CgroupCPURootTests {
    static func read(_ path: String) -> String {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "<missing>")
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test(
        "quota, period, shares and cpus 0 are in the instance's cgroup, a process joins it, and setLimits narrows them"
    )
    func appliedAndNarrowed() throws {
        let cgroups = try TestCgroups()
        let cgroup = try cgroups.create(
            "cpu",
            limits: CgroupLimits(
                pidsMax: 20, cpuShares: 2048, cpuQuota: 50000, cpuPeriod: 100_000,
                cpusetCPUs: "0", cpusetMems: "0"))
        let child = try Child(in: cgroup, exec: "sleep 1000")
        #expect(try cgroup.processes().contains(child.pid))
        let layout = CgroupLayout.detect()
        if layout.mode == .unified {
            let directory = try #require(cgroup.directories.first)
            #expect(Self.read(directory + "/cpu.max") == "50000 100000")
            #expect(Self.read(directory + "/cpuset.cpus") == "0")
            try cgroup.setLimits(CgroupLimits(cpuQuota: 20000, cpuPeriod: 50000))
            #expect(Self.read(directory + "/cpu.max") == "20000 50000")
            return
        }
        let cpu = try #require(cgroup.directories.first { $0.hasPrefix("/sys/fs/cgroup/cpu/") })
        let cpuset = try #require(
            cgroup.directories.first { $0.hasPrefix("/sys/fs/cgroup/cpuset/") })
        #expect(Self.read(cpu + "/cpu.shares") == "2048")
        #expect(Self.read(cpu + "/cpu.cfs_quota_us") == "50000")
        #expect(Self.read(cpu + "/cpu.cfs_period_us") == "100000")
        #expect(Self.read(cpuset + "/cpuset.cpus") == "0")
        #expect(Self.read(cpuset + "/cpuset.mems") == "0")
        // The process runs in the instance directory (no leaves in v1), in the instance's set.
        #expect(Self.read(cpuset + "/cgroup.procs").contains("\(child.pid)"))
        let allowed = Self.read("/proc/\(child.pid)/status").split(separator: "\n")
            .first { $0.hasPrefix("Cpus_allowed_list:") }
        #expect(allowed?.hasSuffix("\t0") == true, "\(allowed ?? "")")

        // Narrowed: a smaller quota over a shorter period; the leaf's cpuset follows.
        try cgroup.setLimits(CgroupLimits(cpuQuota: 10000, cpuPeriod: 50000, cpusetCPUs: "0"))
        #expect(Self.read(cpu + "/cpu.cfs_quota_us") == "10000")
        #expect(Self.read(cpu + "/cpu.cfs_period_us") == "50000")
    }

    @Test(
        "v1: a period the current quota makes too fast for the parent's bandwidth is written after the quota"
    )
    func periodAfterQuota() throws {
        guard CgroupLayout.detect().mode != .unified else { return }
        let cgroups = try TestCgroups()
        let cgroup = try cgroups.create(
            "order", limits: CgroupLimits(cpuQuota: 50000, cpuPeriod: 100_000))
        // The parent may use one CPU: 100000 per 100000.
        let parent = try #require(
            cgroups.driver.parentDirectories.first { $0.hasPrefix("/sys/fs/cgroup/cpu/") })
        try CgroupDirectory(parent).write("100000", "cpu.cfs_quota_us")
        let cpu = try #require(cgroup.directories.first { $0.hasPrefix("/sys/fs/cgroup/cpu/") })
        // Period first would make 50000 per 20000 = 2.5 CPUs: the kernel refuses (EINVAL).
        let direct = CgroupFS.write("20000", to: cpu + "/cpu.cfs_period_us")
        #expect(
            (try? direct.get()) == nil, "the kernel accepted a period above the parent's bandwidth")
        try cgroup.setLimits(CgroupLimits(cpuQuota: 10000, cpuPeriod: 20000))
        #expect(Self.read(cpu + "/cpu.cfs_quota_us") == "10000")
        #expect(Self.read(cpu + "/cpu.cfs_period_us") == "20000")
        try CgroupDirectory(parent).write("-1", "cpu.cfs_quota_us")
    }

    @Test("no app level: the instance is right below the parent, and remove() keeps the parent")
    func noAppLevel() throws {
        let cgroups = try TestCgroups()
        let cgroup = try cgroups.create("solo", app: "", limits: CgroupLimits(cpusetCPUs: "0"))
        // Every prepared hierarchy, and the cpuset one (asked): the instance right below the
        // parent.
        let parents = cgroup.directories.map { String($0.dropLast("/solo".count)) }
        #expect(cgroup.directories.allSatisfy { $0.hasSuffix("/solo") }, "\(cgroup.directories)")
        #expect(Set(cgroups.driver.parentDirectories).isSubset(of: Set(parents)), "\(parents)")
        let child = try Child(in: cgroup, exec: "sleep 1000")
        let opened = try #require(try cgroups.driver.open(instance: "solo", app: ""))
        #expect(try opened.processes() == [child.pid])
        try opened.kill()
        try opened.remove()
        for (directory, parent) in zip(cgroup.directories, parents) {
            #expect(!exists(directory), "\(directory) is still there")
            #expect(exists(parent), "the parent \(parent) was removed")
        }
    }

    @Test(
        "an instance that asked no cpuset has no cpuset cgroup (a host may not let appd write there); it opens, is listed, killed and removed, and a later cpuset is refused naming why"
    )
    func instanceWithoutCpuset() throws {
        guard CgroupLayout.detect().v1Hierarchy(for: "cpuset") != nil,
            CgroupLayout.detect().mode != .unified
        else { return }
        let cgroups = try TestCgroups()
        let cgroup = try cgroups.create("old", limits: CgroupLimits(pidsMax: 20))
        #expect(!cgroup.directories.contains { $0.contains("/cpuset/") }, "\(cgroup.directories)")
        let opened = try #require(try cgroups.driver.open(instance: "old", app: "com.example.test"))
        #expect(!opened.directories.contains { $0.contains("/cpuset/") })
        let child = try Child(in: opened, exec: "sleep 1000")
        #expect(try opened.processes() == [child.pid])
        #expect(
            performing: { try opened.setLimits(CgroupLimits(cpusetCPUs: "0")) },
            throws: {
                ($0 as? AppdError)?.message.contains("no cpuset cgroup") == true
            })
        try opened.kill()
        try opened.remove()
        #expect(cgroup.directories.allSatisfy { !exists($0) })
    }

    @Test("a malformed cpuset is refused before any directory is made")
    func malformedRefused() throws {
        let cgroups = try TestCgroups()
        #expect(
            performing: {
                try cgroups.create("bad", limits: CgroupLimits(cpusetCPUs: "0-x"))
            }, throws: { ($0 as? AppdError)?.message.contains("cpuset cpus '0-x'") == true })
        #expect(
            cgroups.driver.parentDirectories.allSatisfy { !exists($0 + "/com.example.test/bad") })
    }
}
