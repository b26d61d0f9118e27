import AppBundle
import AppdBase
import Foundation
import Testing

@testable import AppContainers

/// SIGKILL the installer at every named step of install, upgrade and uninstall, and at random
/// moments during a large install, then check that the next command finds either the old
/// state or the new one, never a mix, and that recovery leaves nothing behind.
@Suite("crash safety", .serialized, rootOnly)
struct CrashTests {
    static let installPoints = [
        "install.locked", "install.copied", "install.staged", "install.synced",
        "install.data-published", "install.published", "install.committed", "install.old-removed",
    ]

    /// Runs `appd` with APPD_CRASH_AT=point and expects it to die by SIGKILL at that point (or,
    /// for points the path does not pass, to finish normally).
    func crash(_ args: [String], at point: String) throws -> RunResult {
        try runAppd(args, environment: ["APPD_CRASH_AT": point])
    }

    /// Runs recovery the way every changing command does: doctor repairs and reports.
    func recover(_ root: String) throws {
        _ = try store(root).doctor(repair: true)
    }

    @Test(
        "a crash at any step of a first install leaves nothing or the installed app",
        arguments: installPoints)
    func firstInstall(point: String) throws {
        let scratch = Scratch()
        let root = scratch.sub("root")
        let bundle = try makeBundle(at: scratch.sub("src/Hello.app"))
        let run = try crash(["install", "--no-daemon", "--root", root, bundle], at: point)
        try recover(root)
        let apps = try store(root).apps()
        switch point {
        case "install.committed", "install.old-removed":
            #expect(run.signaled || run.status == 0)
            #expect(apps.map(\.bundleID) == ["com.example.hello"], "\(point): the commit happened")
        case "install.data-published" where !run.signaled:
            Issue.record("\(point) should be reached by a first install")
        default:
            #expect(run.signaled, "\(point) not reached: \(run.stderr)")
            #expect(apps.isEmpty, "\(point): nothing should be installed")
        }
        try expectConsistent(root)
        // And the state root still works.
        #expect(try runAppd(["install", "--no-daemon", "--root", root, bundle]).status == 0)
        try expectConsistent(root)
    }

    @Test(
        "a crash at any step of an upgrade leaves the old version or the new one, data intact",
        arguments: installPoints)
    func upgrade(point: String) throws {
        let scratch = Scratch()
        let root = scratch.sub("root")
        let v1 = try store(root).install(
            bundleAt: makeBundle(at: scratch.sub("v1/Hello.app"), version: "1")
        ).app
        let note = "\(v1.dataContainer(in: StateRoot(path: root)))/Documents/note"
        try "keep me".write(toFile: note, atomically: false, encoding: .utf8)
        let v2 = try makeBundle(at: scratch.sub("v2/Hello.app"), version: "2")
        let run = try crash(["install", "--no-daemon", "--root", root, v2], at: point)
        try recover(root)
        let app = try store(root).app("com.example.hello")
        // An upgrade keeps its data container, so it never reaches install.data-published and
        // runs to completion.
        let committed =
            ["install.committed", "install.old-removed"].contains(point) || !run.signaled
        if point != "install.data-published" {
            #expect(run.signaled, "\(point) not reached: \(run.stderr)")
        }
        #expect(app.version == (committed ? "2" : "1"), "\(point)")
        #expect(app.bundleUUID == v1.bundleUUID ? !committed : committed)
        #expect(app.dataUUID == v1.dataUUID && app.uid == v1.uid)
        #expect(try String(contentsOfFile: note, encoding: .utf8) == "keep me")
        try expectConsistent(root)
    }

    @Test(
        "a crash at any step of an uninstall leaves the app installed or fully gone",
        arguments: ["uninstall.committed", "uninstall.bundle-removed"], [false, true])
    func uninstall(point: String, keepData: Bool) throws {
        let scratch = Scratch()
        let root = scratch.sub("root")
        let app = try store(root).install(bundleAt: makeBundle(at: scratch.sub("src/Hello.app")))
            .app
        let run = try crash(
            ["uninstall", "--no-daemon", "--root", root] + (keepData ? ["--keep-data"] : []) + [
                "com.example.hello"
            ], at: point)
        #expect(run.signaled || (keepData && point == "uninstall.bundle-removed"), "\(run.stderr)")
        try recover(root)
        let apps = try store(root).apps()
        if keepData {
            #expect(apps.map(\.state) == [.dataKept])
            #expect(
                FileManager.default.fileExists(atPath: app.dataContainer(in: StateRoot(path: root)))
            )
        } else {
            #expect(apps.isEmpty)
        }
        try expectConsistent(root)
    }

    @Test("SIGKILL at random moments of a 2,000-file install and upgrade never leaves a mix")
    func randomKills() throws {
        let scratch = Scratch()
        let root = scratch.sub("root")
        var files: [String: String] = [:]
        for i in 0..<2000 {
            files["Resources/d\(i % 20)/f\(i).txt"] = String(repeating: "x", count: 1000 + i)
        }
        let v1 = try makeBundle(
            at: scratch.sub("v1/Big.app"), id: "com.example.big", version: "1", executable: "Big",
            extraFiles: files)
        let v2 = try makeBundle(
            at: scratch.sub("v2/Big.app"), id: "com.example.big", version: "2", executable: "Big",
            extraFiles: files)
        // How long an undisturbed install takes, to spread the kills over it.
        let started = Date()
        #expect(try runAppd(["install", "--no-daemon", "--root", root, v1]).status == 0)
        let duration = Date().timeIntervalSince(started)
        var generator = SystemRandomNumberGenerator()
        var outcomes: [String: Int] = [:]
        for round in 0..<16 {
            let target = round % 2 == 0 ? v2 : v1
            let run = try runAppd(
                ["install", "--no-daemon", "--root", root, "--allow-downgrade", target],
                killAfter: Double.random(in: 0...(duration * 1.2), using: &generator))
            try recover(root)
            let app = try store(root).app("com.example.big")
            #expect(["1", "2"].contains(app.version ?? ""))
            outcomes[run.signaled ? "killed" : "finished", default: 0] += 1
            try expectConsistent(root)
        }
        print(
            "random kills over \(String(format: "%.0f", duration * 1000)) ms installs: \(outcomes)")
    }
}

/// The full recovery (every container listed, every row read) runs when a change did not
/// finish (`.mutating` is left) and on a store's first change; otherwise only staging is
/// emptied, so installs do not slow down as apps accumulate.
@Suite("recovery after unfinished changes", rootOnly)
struct MutationMarkTests {
    @Test("a long-lived store scans for orphans again only when a change was left unfinished")
    func markDrivesFullRecovery() throws {
        let scratch = Scratch()
        let root = scratch.sub("root")
        let store = try store(root)
        let first = try store.install(
            bundleAt: makeBundle(at: scratch.sub("a/A.app"), id: "com.example.a"))
        #expect(access("\(root)/.mutating", F_OK) != 0, "a finished install leaves no mark")
        _ = first

        // An orphan, as a crashed process of another kind would leave it, but no mark: this
        // store already recovered once and does not look.
        let orphan = "\(root)/Containers/Data/\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: orphan, withIntermediateDirectories: false)
        let second = try store.install(
            bundleAt: makeBundle(at: scratch.sub("b/B.app"), id: "com.example.b"))
        #expect(second.recovery.orphanDataContainers.isEmpty)
        #expect(FileManager.default.fileExists(atPath: orphan))

        // The mark of a change that did not finish: the next change scans and removes it.
        FileManager.default.createFile(atPath: "\(root)/.mutating", contents: nil)
        let third = try store.install(
            bundleAt: makeBundle(at: scratch.sub("c/C.app"), id: "com.example.c"))
        #expect(
            third.recovery.orphanDataContainers == [URL(fileURLWithPath: orphan).lastPathComponent])
        #expect(!FileManager.default.fileExists(atPath: orphan))
        #expect(access("\(root)/.mutating", F_OK) != 0)

        // A refused install leaves the mark (it may have failed half-way): the next one scans.
        #expect(throws: AppdError.self) {
            try store.install(bundleAt: scratch.sub("missing/Nothing.app"))
        }
        #expect(access("\(root)/.mutating", F_OK) == 0)
        try FileManager.default.createDirectory(atPath: orphan, withIntermediateDirectories: false)
        let fourth = try store.install(
            bundleAt: makeBundle(at: scratch.sub("d/D.app"), id: "com.example.d"))
        #expect(fourth.recovery.orphanDataContainers.count == 1)
        try expectConsistent(root)
    }

    @Test("a new store (a new process) scans on its first change even without a mark")
    func firstChangeScans() throws {
        let scratch = Scratch()
        let root = scratch.sub("root")
        _ = try store(root).install(
            bundleAt: makeBundle(at: scratch.sub("a/A.app"), id: "com.example.a"))
        let orphan = "\(root)/Containers/Data/\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: orphan, withIntermediateDirectories: false)
        let next = try store(root).install(
            bundleAt: makeBundle(at: scratch.sub("b/B.app"), id: "com.example.b"))
        #expect(next.recovery.orphanDataContainers.count == 1)
        #expect(!FileManager.default.fileExists(atPath: orphan))
    }
}
