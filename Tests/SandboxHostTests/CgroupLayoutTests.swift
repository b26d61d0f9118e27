import AppBundle
import AppdBase
import Foundation
import Testing

@testable import Sandbox

@Suite("cgroup layout detection and names")
struct CgroupLayoutTests {
    @Test("this machine's mounts are hybrid: v1 memory, pids, cpu; a v2 tree at unified")
    func hybrid() throws {
        let layout = CgroupLayout.parse(
            mountinfo: hybridMountinfo, procSelfCgroup: hybridProcSelfCgroup)
        #expect(layout.mode == .hybrid)
        #expect(layout.unified?.mountPoint == "/sys/fs/cgroup/unified")
        #expect(layout.unified?.ownCgroup == "/")
        // name=systemd carries no controller and is left out.
        #expect(
            layout.v1.map(\.controllers) == [
                ["cpu"], ["cpuacct"], ["cpuset"], ["memory"], ["devices"], ["freezer"], ["blkio"],
                ["pids"],
            ])
        let memory = try #require(layout.v1Hierarchy(for: "memory"))
        #expect(memory.ownCgroup == "/process_api/4b8aed88462c7e434cc44161a20f870c")
        #expect(
            memory.ownDirectory
                == "/sys/fs/cgroup/memory/process_api/4b8aed88462c7e434cc44161a20f870c")
        #expect(layout.v1Hierarchy(for: "pids")?.ownDirectory == "/sys/fs/cgroup/pids")
    }

    @Test("the live layout of this host parses like the recorded one")
    func live() {
        let layout = CgroupLayout.detect()
        #expect(layout.mode != .none)
        if layout.mode == .hybrid {
            #expect(layout.v1Hierarchy(for: "memory") != nil)
        }
    }

    @Test("systemd's unified layout: appd's own cgroup is its service")
    func unified() {
        let layout = CgroupLayout.parse(
            mountinfo: unifiedMountinfo, procSelfCgroup: "0::/system.slice/appd.service\n")
        #expect(layout.mode == .unified)
        #expect(layout.v1.isEmpty)
        #expect(layout.unified?.ownDirectory == "/sys/fs/cgroup/system.slice/appd.service")
    }

    @Test("co-mounted cpu,cpuacct is one hierarchy, matched to its /proc/self/cgroup line")
    func coMounted() {
        let layout = CgroupLayout.parse(
            mountinfo: """
                30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
                31 25 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
                32 25 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu,cpuacct
                """,
            procSelfCgroup: "3:cpu,cpuacct:/user.slice\n2:memory:/user.slice\n")
        #expect(layout.mode == .legacy)
        #expect(layout.v1.count == 2)
        #expect(
            layout.v1Hierarchy(for: "cpuacct")?.ownDirectory
                == "/sys/fs/cgroup/cpu,cpuacct/user.slice")
    }

    @Test("inside a cgroup namespace or a bind mount, paths are relative to the mount's root")
    func mountRoot() {
        let layout = CgroupLayout.parse(
            mountinfo: "40 30 0:30 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw",
            procSelfCgroup: "0::/docker/abc/appd\n")
        let unified = layout.unified
        #expect(unified?.mountRoot == "/docker/abc")
        #expect(unified?.ownDirectory == "/sys/fs/cgroup/appd")
        #expect(unified?.directory(of: "/docker/abc") == "/sys/fs/cgroup")
        #expect(unified?.directory(of: "/docker/other") == nil)
        #expect(unified?.directory(of: "/docker/abcdef") == nil)
        // A cgroup outside our cgroup namespace shows as /.. and is unusable.
        let outside = CgroupLayout.parse(
            mountinfo: unifiedMountinfo, procSelfCgroup: "0::/../../init.scope\n")
        #expect(outside.unified?.ownCgroup == nil)
        #expect(throws: AppdError.self) {
            try Cgroups.driver(layout: outside, settings: CgroupSettings())
        }
    }

    @Test("mountinfo escapes (\\040 for a space) are decoded")
    func escapes() {
        let layout = CgroupLayout.parse(
            mountinfo: "41 31 0:38 / /mnt/my\\040cgroups rw,relatime - cgroup2 cgroup2 rw",
            procSelfCgroup: "0::/\n")
        #expect(layout.unified?.mountPoint == "/mnt/my cgroups")
    }

    @Test("malformed lines are skipped; nothing mounted is .none and has no driver")
    func none() {
        let layout = CgroupLayout.parse(mountinfo: "garbage\n1 2 3\n", procSelfCgroup: "x")
        #expect(layout.mode == .none)
        #expect(throws: AppdError.self) {
            try Cgroups.driver(layout: layout, settings: CgroupSettings())
        }
    }

    @Test("app ids and instance names are single, harmless directory names")
    func names() throws {
        for good in [
            "com.example.notes", "3F2504E0-4F89-11D3-9A0C-0305E82C3301", "a", "a_b-c.d",
            String(repeating: "x", count: Cgroups.maxNameLength),
        ] {
            try Cgroups.validateName(good, "app id")
        }
        for bad in [
            "", ".", "..", ".hidden", "a/b", "../x", "/abs", "a b", "a\nb", "caf\u{e9}",
            String(repeating: "x", count: Cgroups.maxNameLength + 1),
            "memory.max", "cgroup.procs", "pids.max", "cpu.weight", "Memory.high", "tasks",
        ] {
            #expect(throws: AppdError.self, "\(bad.debugDescription) accepted") {
                try Cgroups.validateName(bad, "app id")
            }
        }
        let error = try #require(throws: AppdError.self) {
            try Cgroups.validateName("a/b", "instance name")
        }
        #expect(error.message.contains("instance name 'a/b'"))
    }

    @Test("a relative parent lies below appd's own cgroup, an absolute one at the root")
    func parents() throws {
        var settings = CgroupSettings()
        #expect(
            try Cgroups.parentPath(settings: settings, own: "/system.slice/appd.service")
                == "/system.slice/appd.service/apps")
        #expect(try Cgroups.parentPath(settings: settings, own: "/") == "/apps")
        settings.parent = "/appd.slice//apps/"
        #expect(try Cgroups.parentPath(settings: settings, own: nil) == "/appd.slice/apps")
        for bad in ["../../escape", "..", "../", "a/../b", "/a/../b", "/../b", "", "/"] {
            settings.parent = bad
            #expect(throws: AppdError.self, "\(bad) accepted") {
                try Cgroups.parentPath(settings: settings, own: "/x")
            }
        }
        settings.parent = "apps"
        #expect(throws: AppdError.self) { try Cgroups.parentPath(settings: settings, own: nil) }
    }

    @Test(
        "the hybrid driver prepares memory, pids, cpu, cpuacct and blkio (the engines' stats) and the v2 tree (cpuset only for an instance that asks one); v1 freezer only without it"
    )
    func hybridPlaces() throws {
        let layout = CgroupLayout.parse(
            mountinfo: hybridMountinfo, procSelfCgroup: hybridProcSelfCgroup)
        let driver = try Cgroups.driver(layout: layout, settings: CgroupSettings())
        #expect(
            driver.parentDirectories == [
                "/sys/fs/cgroup/memory/process_api/4b8aed88462c7e434cc44161a20f870c/apps",
                "/sys/fs/cgroup/pids/apps", "/sys/fs/cgroup/cpu/apps",
                "/sys/fs/cgroup/cpuacct/apps", "/sys/fs/cgroup/blkio/apps",
                "/sys/fs/cgroup/unified/apps",
            ])
        var legacy = layout
        legacy.unified = nil
        legacy.mode = .legacy
        let v1Only = try Cgroups.driver(layout: legacy, settings: CgroupSettings(parent: "/appd"))
        #expect(v1Only.parentDirectories.last == "/sys/fs/cgroup/freezer/appd")
    }

    @Test("limits map to v2 files and to their v1 equivalents (weight 100 = 1024 shares)")
    func limitFiles() throws {
        let limits = CgroupLimits(memoryMax: 64 << 20, pidsMax: 20, cpuWeight: 100)
        #expect(
            UnifiedCgroups.limitFiles(limits).map { "\($0.file)=\($0.value)" } == [
                "memory.max=67108864", "pids.max=20", "cpu.weight=100",
            ])
        #expect(
            HybridCgroups.limitFiles(limits).map { "\($0.file)=\($0.value)" } == [
                "memory.limit_in_bytes=67108864", "pids.max=20", "cpu.shares=1024",
            ])
        #expect(HybridCgroups.limitFiles(CgroupLimits(cpuWeight: 1)).first?.value == "10")
        #expect(UnifiedCgroups.limitFiles(CgroupLimits()).isEmpty)
        #expect(CgroupSettings().defaultLimits == CgroupLimits(memoryMax: 512 << 20, pidsMax: 512))
        for bad in [
            CgroupLimits(memoryMax: 100), CgroupLimits(pidsMax: 0),
            CgroupLimits(cpuWeight: 10001),
        ] {
            #expect(throws: AppdError.self) { try bad.validate() }
        }
    }

    @Test("errors name the path and errno, with a delegation hint for EACCES")
    func errors() {
        let error = AppdError.cgroup(
            "failed to write '20' to",
            "/sys/fs/cgroup/x/apps/a/i/pids.max", CgroupFS.Failure(EACCES))
        #expect(
            error.message == "failed to write '20' to /sys/fs/cgroup/x/apps/a/i/pids.max: "
                + "EACCES (Permission denied)")
        #expect(error.errno == EACCES)
        #expect(error.hint?.contains("no write access to /sys/fs/cgroup/x/apps/a/i") == true)
        #expect(error.hint?.contains("Delegate=yes") == true)
        let busy = AppdError.cgroup(
            "failed to write '+memory' to",
            "/sys/fs/cgroup/x/cgroup.subtree_control", CgroupFS.Failure(EBUSY))
        #expect(busy.hint?.contains("leaf") == true)
        let noController = AppdError.cgroup(
            "failed to write '1' to",
            "/sys/fs/cgroup/x/memory.max", CgroupFS.Failure(ENOENT))
        #expect(noController.hint?.contains("memory controller") == true)
    }
}
