import Foundation
import Testing

@testable import AppContainers

@Suite("doctor", .serialized, rootOnly)
struct DoctorTests {
    @Test("a healthy state root has no findings")
    func healthy() throws {
        let scratch = Scratch()
        let store = try store(scratch.sub("root"))
        try store.install(bundleAt: makeBundle(at: scratch.sub("src/Hello.app")))
        let report = try store.doctor(repair: false)
        #expect(report.findings.isEmpty, "\(report.findings)")
        #expect(report.appsChecked == 1)
    }

    @Test("repairs data container owner and mode, restores standard directories, removes orphans")
    func repairs() throws {
        let scratch = Scratch()
        let store = try store(scratch.sub("root"))
        let app = try store.install(bundleAt: makeBundle(at: scratch.sub("src/Hello.app"))).app
        let data = app.dataContainer(in: store.root)
        chmod(data, 0o755)
        chown(data, 0, 0)
        rmdir("\(data)/Library/Caches")
        mkdir("\(store.root.dataContainersPath)/ORPHAN", 0o700)
        mkdir("\(store.root.stagingPath)/install-leftover", 0o700)

        let check = try store.doctor(repair: false)
        #expect(check.unresolved.count == 3, "\(check.findings)")
        #expect(statOf(data)?.st_mode ?? 0 & 0o777 != 0o700)  // check-only changed nothing

        let report = try store.doctor(repair: true)
        #expect(report.unresolved.isEmpty, "\(report.unresolved)")
        let st = try #require(statOf(data))
        #expect(st.st_uid == app.uid && st.st_mode & 0o7777 == 0o700)
        #expect(statOf("\(data)/Library/Caches")?.st_uid == app.uid)
        try expectConsistent(store.root.path)
        #expect(try store.doctor(repair: false).findings.isEmpty)
    }

    @Test(
        "appd doctor reports and changes nothing; --repair repairs; --check-only is still accepted")
    func repairOnlyWhenAsked() throws {
        let scratch = Scratch()
        let root = scratch.sub("root")
        _ = try store(root)
        chmod(root, 0o755)
        for arguments in [["doctor"], ["doctor", "--check-only"]] {
            let check = try runAppd(arguments + ["--root", root])
            #expect(check.status == 1, "\(check.stdout)\(check.stderr)")
            #expect(
                check.stdout.contains("expected mode 711 owner 0 [NEEDS ATTENTION]"),
                "\(check.stdout)")
            #expect(
                statOf(root).map { $0.st_mode & 0o7777 } == 0o755,
                "\(arguments) changed the root's mode")
        }
        let both = try runAppd(["doctor", "--repair", "--check-only", "--root", root])
        #expect(both.status == 64, "\(both.stderr)")
        #expect(statOf(root).map { $0.st_mode & 0o7777 } == 0o755)
        let repair = try runAppd(["doctor", "--repair", "--root", root])
        #expect(repair.status == 0, "\(repair.stdout)\(repair.stderr)")
        #expect(
            repair.stdout.contains("[repaired: reset to mode 711 owner root]"), "\(repair.stdout)")
        #expect(statOf(root).map { $0.st_mode & 0o7777 } == 0o711)

        let missing = try runAppd(["doctor", "--root", scratch.sub("never-created")])
        #expect(missing.status == 1)
        #expect(
            missing.stderr.contains("does not exist: there is nothing to check"),
            "\(missing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: scratch.sub("never-created")))
    }

    @Test("a missing bundle is reported for a person, not papered over")
    func missingBundle() throws {
        let scratch = Scratch()
        let store = try store(scratch.sub("root"))
        let app = try store.install(bundleAt: makeBundle(at: scratch.sub("src/Hello.app"))).app
        let bundle = try #require(app.bundlePath(in: store.root))
        chmod(bundle, 0o755)
        try FileManager.default.removeItem(atPath: "\(bundle)/Hello")
        let report = try store.doctor(repair: true)
        #expect(report.unresolved.map(\.problem) == ["its executable \(bundle)/Hello is missing"])
    }

    @Test("repair never chowns through a symlink the app planted as Library")
    func symlinkAttack() throws {
        let scratch = Scratch()
        let victim = scratch.sub("victim")
        mkdir(victim, 0o700)
        mkdir("\(victim)/Caches", 0o700)
        let store = try store(scratch.sub("root"))
        let app = try store.install(bundleAt: makeBundle(at: scratch.sub("src/Hello.app"))).app
        let data = app.dataContainer(in: store.root)
        try FileManager.default.removeItem(atPath: "\(data)/Library")
        symlink(victim, "\(data)/Library")
        let report = try store.doctor(repair: true)
        #expect(statOf(victim)?.st_uid == 0)
        #expect(statOf("\(victim)/Caches")?.st_uid == 0)
        #expect(!report.unresolved.isEmpty, "a container doctor could not repair must be reported")
    }
}
