import AppBundle
import AppdBase
import Foundation
import Testing

@testable import AppContainers

@Suite("install, upgrade, uninstall", .serialized, rootOnly)
struct InstallTests {
    nonisolated(unsafe) static let uuidPattern =
        #/^[0-9A-F]{8}-[0-9A-F]{4}-4[0-9A-F]{3}-[89AB][0-9A-F]{3}-[0-9A-F]{12}$/#

    @Test(
        "install publishes a read-only bundle container and a private data container at random v4 UUIDs"
    )
    func install() throws {
        let scratch = Scratch()
        let bundle = try makeBundle(
            at: scratch.sub("src/Hello.app"),
            extraFiles: ["greeting.txt": "hi\n", "Base.lproj/x.strings": "x"])
        let store = try store(scratch.sub("root"))
        let result = try store.install(bundleAt: bundle)
        let app = result.app

        #expect(app.bundleID == "com.example.hello" && app.state == .installed)
        #expect(try Self.uuidPattern.wholeMatch(in: #require(app.bundleUUID)) != nil)
        #expect(try Self.uuidPattern.wholeMatch(in: app.dataUUID) != nil)
        #expect(app.bundleUUID != app.dataUUID)
        #expect(store.config.uidRange.contains(app.uid))
        #expect(result.previousVersion == nil && !result.reusedData)

        let container = try #require(app.bundleContainer(in: store.root))
        let bundlePath = try #require(app.bundlePath(in: store.root))
        #expect(bundlePath == "\(container)/Hello.app")
        // Bundle container: only root and the app's group may enter; nobody may write.
        let top = try #require(statOf(container))
        #expect(top.st_uid == 0 && top.st_gid == app.gid && top.st_mode & 0o7777 == 0o550)
        #expect(statOf(bundlePath)!.st_mode & 0o7777 == 0o555)
        #expect(statOf("\(bundlePath)/Hello")!.st_mode & 0o7777 == 0o555)
        #expect(statOf("\(bundlePath)/greeting.txt")!.st_mode & 0o7777 == 0o444)
        #expect(statOf("\(bundlePath)/Base.lproj")!.st_mode & 0o7777 == 0o555)
        #expect(try String(contentsOfFile: "\(bundlePath)/greeting.txt", encoding: .utf8) == "hi\n")
        #expect(statOf("\(bundlePath)/greeting.txt")!.st_uid == 0)

        let data = app.dataContainer(in: store.root)
        for relative in [
            "", "/Documents", "/Library", "/Library/Preferences", "/Library/Caches", "/tmp",
        ] {
            let st = try #require(statOf(data + relative), "\(relative) missing")
            #expect(
                st.st_uid == app.uid && st.st_gid == app.gid && st.st_mode & 0o7777 == 0o700,
                "\(relative)")
        }
        #expect(entries(store.root.stagingPath).isEmpty)
        #expect(try store.app("COM.EXAMPLE.HELLO").bundleID == "com.example.hello")
        #expect(
            try store.app("com.example.hello").decodedEntitlements().values[
                "com.apple.security.app-sandbox"] == .bool(true))
        try expectConsistent(store.root.path)
    }

    @Test("upgrade: new bundle container, same data container untouched, same uid, old bundle gone")
    func upgrade() throws {
        let scratch = Scratch()
        let store = try store(scratch.sub("root"))
        let v1 = try store.install(
            bundleAt: makeBundle(at: scratch.sub("v1/Hello.app"), version: "1.0")
        ).app
        let note = "\(v1.dataContainer(in: store.root))/Documents/note.txt"
        try "mine".write(toFile: note, atomically: false, encoding: .utf8)
        let oldContainer = try #require(v1.bundleContainer(in: store.root))

        let result = try store.install(
            bundleAt: makeBundle(at: scratch.sub("v2/Hello.app"), version: "1.1"))
        let v2 = result.app
        #expect(result.previousVersion == "1.0" && result.reusedData)
        #expect(v2.bundleUUID != v1.bundleUUID)
        #expect(v2.dataUUID == v1.dataUUID && v2.uid == v1.uid)
        // The registry stores milliseconds, so compare at that precision.
        #expect(abs(v2.installedAt.timeIntervalSince(v1.installedAt)) < 0.001)
        #expect(v2.updatedAt.timeIntervalSince(v1.updatedAt) > -0.001)
        #expect(v2.version == "1.1")
        #expect(try String(contentsOfFile: note, encoding: .utf8) == "mine")
        #expect(!FileManager.default.fileExists(atPath: oldContainer))
        try expectConsistent(store.root.path)
    }

    @Test("a lower CFBundleVersion is refused unless downgrades are allowed")
    func downgrade() throws {
        let scratch = Scratch()
        let store = try store(scratch.sub("root"))
        try store.install(bundleAt: makeBundle(at: scratch.sub("v2/Hello.app"), version: "2.0"))
        let old = try makeBundle(at: scratch.sub("v1/Hello.app"), version: "1.9")
        #expect {
            try store.install(bundleAt: old)
        } throws: { error in
            (error as? AppdError)?.code == .conflict && "\(error)".contains("--allow-downgrade")
        }
        #expect(try store.app("com.example.hello").version == "2.0")
        var options = InstallOptions()
        options.allowDowngrade = true
        #expect(try store.install(bundleAt: old, options: options).app.version == "1.9")
        try expectConsistent(store.root.path)
    }

    @Test("an id differing only in case from an installed one is refused")
    func caseClash() throws {
        let scratch = Scratch()
        let store = try store(scratch.sub("root"))
        try store.install(
            bundleAt: makeBundle(at: scratch.sub("a/Hello.app"), id: "com.example.hello"))
        #expect {
            try store.install(
                bundleAt: makeBundle(at: scratch.sub("b/Hello.app"), id: "com.Example.Hello"))
        } throws: { error in
            (error as? AppdError)?.code == .conflict && "\(error)".contains("differs only in case")
        }
        #expect(try store.apps().count == 1)
        try expectConsistent(store.root.path)
    }

    @Test("each app gets its own uid; a failed install consumes none")
    func uids() throws {
        let scratch = Scratch()
        let store = try store(scratch.sub("root"))
        let a = try store.install(
            bundleAt: makeBundle(at: scratch.sub("a/A.app"), id: "com.example.a", executable: "A")
        ).app
        let bad = try makeBundle(
            at: scratch.sub("bad/Bad.app"), id: "com.example.bad", executable: "Bad")
        chmod("\(bad)/Bad", 0o644)  // not executable
        #expect(throws: AppdError.self) { try store.install(bundleAt: bad) }
        let b = try store.install(
            bundleAt: makeBundle(at: scratch.sub("b/B.app"), id: "com.example.b", executable: "B")
        ).app
        #expect(a.uid != b.uid)
        #expect(b.uid == a.uid + 1, "the failed install must not have consumed a uid")
    }

    @Test("a refused bundle leaves no trace: no staging leftovers, no row, no containers")
    func refusedLeavesNothing() throws {
        let scratch = Scratch()
        let store = try store(scratch.sub("root"))
        let bundle = try makeBundle(at: scratch.sub("src/Hello.app"))
        symlink("/etc/passwd", "\(bundle)/escape")
        #expect {
            try store.install(bundleAt: bundle)
        } throws: { error in
            (error as? AppdError)?.code == .invalidBundle
                && (error as? AppdError)?.problems.contains { $0.path == "escape" } == true
        }
        #expect(try store.apps().isEmpty)
        #expect(entries(store.root.stagingPath).isEmpty)
        #expect(entries(store.root.bundleContainersPath).isEmpty)
        #expect(entries(store.root.dataContainersPath).isEmpty)
    }

    @Test("uninstall removes both containers and frees the uid")
    func uninstall() throws {
        let scratch = Scratch()
        let store = try store(scratch.sub("root"))
        let app = try store.install(bundleAt: makeBundle(at: scratch.sub("src/Hello.app"))).app
        let result = try store.uninstall("com.example.hello", keepData: false)
        #expect(!result.keptData)
        #expect(try store.apps().isEmpty)
        #expect(!FileManager.default.fileExists(atPath: app.dataContainer(in: store.root)))
        #expect(entries(store.root.bundleContainersPath).isEmpty)
        #expect(throws: AppdError.self) {
            try store.uninstall("com.example.hello", keepData: false)
        }
        let again = try store.install(bundleAt: makeBundle(at: scratch.sub("src2/Hello.app"))).app
        #expect(again.uid == app.uid && again.dataUUID != app.dataUUID)
    }

    @Test("uninstall --keep-data keeps data and uid; reinstalling returns the app to its data")
    func keepData() throws {
        let scratch = Scratch()
        let store = try store(scratch.sub("root"))
        let app = try store.install(bundleAt: makeBundle(at: scratch.sub("src/Hello.app"))).app
        try "saved".write(
            toFile: "\(app.dataContainer(in: store.root))/Documents/s.txt", atomically: false,
            encoding: .utf8)
        let kept = try store.uninstall("com.example.hello", keepData: true).app
        #expect(kept.state == .dataKept && kept.bundleUUID == nil)
        #expect(entries(store.root.bundleContainersPath).isEmpty)
        try expectConsistent(store.root.path)
        // The uid stays reserved: another app does not get it.
        let other = try store.install(
            bundleAt: makeBundle(
                at: scratch.sub("o/O.app"), id: "com.example.other", executable: "O")
        ).app
        #expect(other.uid != app.uid)

        let back = try store.install(bundleAt: makeBundle(at: scratch.sub("src2/Hello.app")))
        #expect(back.reusedData && back.app.uid == app.uid && back.app.dataUUID == app.dataUUID)
        #expect(
            try String(
                contentsOfFile: "\(app.dataContainer(in: store.root))/Documents/s.txt",
                encoding: .utf8) == "saved")
        // Removing the kept data of an uninstalled app frees everything.
        _ = try store.uninstall("com.example.hello", keepData: true)
        _ = try store.uninstall("com.example.hello", keepData: false)
        #expect(!FileManager.default.fileExists(atPath: app.dataContainer(in: store.root)))
    }

    @Test("uninstall never follows symlinks an app planted in its data container")
    func uninstallSymlinkAttack() throws {
        let scratch = Scratch()
        let victim = scratch.sub("victim")
        try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: true)
        try "precious".write(toFile: "\(victim)/file", atomically: false, encoding: .utf8)
        let store = try store(scratch.sub("root"))
        let app = try store.install(bundleAt: makeBundle(at: scratch.sub("src/Hello.app"))).app
        let documents = "\(app.dataContainer(in: store.root))/Documents"
        symlink(victim, "\(documents)/link-to-dir")
        symlink("\(victim)/file", "\(documents)/link-to-file")
        try store.uninstall("com.example.hello", keepData: false)
        #expect(try String(contentsOfFile: "\(victim)/file", encoding: .utf8) == "precious")
    }

    @Test("a lost registry is not mistaken for 'nothing installed'")
    func lostRegistry() throws {
        let scratch = Scratch()
        let root = scratch.sub("root")
        let app = try store(root).install(bundleAt: makeBundle(at: scratch.sub("src/Hello.app")))
            .app
        for suffix in ["", "-wal", "-shm"] { unlink("\(root)/registry.sqlite\(suffix)") }
        #expect {
            try store(root)
        } throws: { error in
            (error as? AppdError)?.code == .corruptState
                && "\(error)".contains("registry.sqlite is missing")
        }
        #expect(
            FileManager.default.fileExists(atPath: app.dataContainer(in: StateRoot(path: root))))
    }

    @Test("two installs at the same time, from two processes, both land intact")
    func concurrentInstalls() throws {
        let scratch = Scratch()
        let root = scratch.sub("root")
        let bundles = try (0..<4).map { i in
            try makeBundle(
                at: scratch.sub("s\(i)/App\(i).app"), id: "com.example.app\(i % 2)",
                version: "\(i + 1)", executable: "App\(i)")
        }
        let group = DispatchGroup()
        let results = Locked<[RunResult]>([])
        for bundle in bundles {
            DispatchQueue.global().async(group: group) {
                let result = try? runAppd([
                    "install", "--no-daemon", "--root", root, "--allow-downgrade", bundle,
                ])
                results.withLock {
                    $0.append(
                        result
                            ?? RunResult(
                                status: -1, signaled: false, stdout: "", stderr: "spawn failed"))
                }
            }
        }
        group.wait()
        for result in results.withLock({ $0 }) { #expect(result.status == 0, "\(result.stderr)") }
        let apps = try store(root).apps()
        #expect(apps.map(\.bundleID) == ["com.example.app0", "com.example.app1"])
        #expect(Set(apps.map(\.uid)).count == 2)
        try expectConsistent(root)
    }
}

/// A value shared between threads in tests.
final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
