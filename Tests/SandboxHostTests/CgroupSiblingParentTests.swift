import AppdBase
import Foundation
import Testing

@testable import Sandbox

/// Issue 17: on cgroup v2 under systemd the instances live below the sibling unit
/// appd-apps.service, so that appd.service's own cgroup never has controllers enabled for
/// children and systemd can put the next appd into it on a restart.
@Suite("cgroup parent in a sibling unit (restartable appd.service on cgroup v2)")
struct CgroupSiblingParentTests {
    @Test(
        "the default parent: a sibling unit on v2 under systemd, below appd on hybrid, /appd alone")
    func defaults() {
        let unified = CgroupLayout.parse(
            mountinfo: unifiedMountinfo, procSelfCgroup: "0::/system.slice/appd.service\n")
        let hybrid = CgroupLayout.parse(
            mountinfo: hybridMountinfo, procSelfCgroup: hybridProcSelfCgroup)
        #expect(
            Cgroups.defaultParent(layout: unified, underSystemd: true)
                == "../appd-apps.service/apps")
        #expect(Cgroups.defaultParent(layout: hybrid, underSystemd: true) == "apps")
        #expect(Cgroups.defaultParent(layout: unified, underSystemd: false) == "/appd")
    }

    @Test("a leading ../ names a sibling of appd's own cgroup, once")
    func siblingPath() throws {
        let settings = CgroupSettings(parent: "../appd-apps.service/apps")
        #expect(
            try Cgroups.parentPath(settings: settings, own: "/system.slice/appd.service")
                == "/system.slice/appd-apps.service/apps")
        #expect(
            try Cgroups.parentPath(settings: settings, own: "/appd.service")
                == "/appd-apps.service/apps")
        #expect(throws: AppdError.self, "a sibling of the root cgroup") {
            try Cgroups.parentPath(settings: settings, own: "/")
        }
    }

    /// A fake cgroup2 tree: appd.service holding appd, appd-apps.service (empty, delegated).
    private func fakeTree(withSibling: Bool) throws -> (root: String, layout: CgroupLayout) {
        let root = NSTemporaryDirectory() + "appd-sibling-\(UUID().uuidString)"
        let files = FileManager.default
        func cgroup(_ path: String, procs: String = "") throws {
            try files.createDirectory(atPath: root + path, withIntermediateDirectories: true)
            try "memory pids cpu io\n".write(
                toFile: root + path + "/cgroup.controllers", atomically: false, encoding: .utf8)
            try "".write(
                toFile: root + path + "/cgroup.subtree_control", atomically: false, encoding: .utf8)
            try procs.write(
                toFile: root + path + "/cgroup.procs", atomically: false, encoding: .utf8)
        }
        try cgroup("")
        try cgroup("/system.slice")
        try cgroup("/system.slice/appd.service", procs: "4242\n")
        if withSibling {
            try cgroup("/system.slice/appd-apps.service")
            try cgroup("/system.slice/appd-apps.service/apps")
        }
        let layout = CgroupLayout(
            mode: .unified,
            unified: .init(
                version: 2, controllers: ["memory", "pids", "cpu"], mountPoint: root,
                ownCgroup: "/system.slice/appd.service"),
            v1: [])
        return (root, layout)
    }

    @Test("prepare() leaves appd in appd.service and enables controllers in the sibling only")
    func prepareInSibling() throws {
        let (root, layout) = try fakeTree(withSibling: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let driver = try Cgroups.driver(
            layout: layout,
            settings: CgroupSettings(
                parent: Cgroups.defaultParent(layout: layout, underSystemd: true)))
        try driver.prepare()
        #expect(driver.parentDirectories == [root + "/system.slice/appd-apps.service/apps"])
        let service = root + "/system.slice/appd.service"
        #expect(
            !FileManager.default.fileExists(atPath: service + "/daemon"), "appd moved into a leaf")
        #expect(
            try String(contentsOfFile: service + "/cgroup.subtree_control", encoding: .utf8).isEmpty
        )
        #expect(try String(contentsOfFile: service + "/cgroup.procs", encoding: .utf8) == "4242\n")
        let sibling = root + "/system.slice/appd-apps.service"
        #expect(
            try String(contentsOfFile: sibling + "/cgroup.subtree_control", encoding: .utf8)
                == "+memory +pids +cpu")
    }

    @Test("a missing sibling unit is an error naming it, not a cgroup appd makes itself")
    func missingSibling() throws {
        let (root, layout) = try fakeTree(withSibling: false)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let driver = try Cgroups.driver(
            layout: layout, settings: CgroupSettings(parent: "../appd-apps.service/apps"))
        let error = try #require(throws: AppdError.self) { try driver.prepare() }
        #expect(error.message.contains("/system.slice/appd-apps.service"))
        #expect(error.hint?.contains("systemctl start appd-apps.service") == true)
        #expect(!FileManager.default.fileExists(atPath: root + "/system.slice/appd-apps.service"))
    }
}
