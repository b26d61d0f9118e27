import AppdAPI
import AppdClient
import Foundation
import Testing

/// `tmp/` is the system's (issue 27 §4): appd empties it when the app's last instance exits,
/// and at a launch that finds it holding something after a daemon crash. The emptying runs as
/// root on a tree the app made, so the attack is a link the app planted there.
@Suite("tmp emptied after the last instance", .serialized, rootOnly)
struct TemporaryDirectoryTests {
    static func entries(_ path: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }

    @Test(
        "a file the app wrote in tmp is gone after its exit; Documents keeps its file and tmp its owner and mode"
    )
    func emptiedAfterExit() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.tmp")
        let data = try daemon.dataContainer("com.example.tmp")
        var before = stat()
        #expect(lstat("\(data)/tmp", &before) == 0)
        let run = try daemon.launch(
            "com.example.tmp",
            [
                "home", "file", "tmp/scratch", "4096", "mkdir", "tmp/sub", "file", "tmp/sub/inner",
                "10",
                "file", "Documents/keep", "4096",
            ])
        #expect(try daemon.wait(run.id).exit?.code == 0)
        let output = try daemon.logs(run.id)
        #expect(output.components(separatedBy: " allowed").count == 5, "\(output)")
        #expect(Self.entries("\(data)/tmp") == [])
        #expect(Self.entries("\(data)/Documents") == ["keep"])
        var after = stat()
        #expect(lstat("\(data)/tmp", &after) == 0)
        #expect(after.st_mode & S_IFMT == S_IFDIR && after.st_mode & 0o7777 == 0o700)
        #expect(after.st_uid == before.st_uid && after.st_gid == before.st_gid)
        // A launch right after the exit does not wait on the emptying forever.
        let again = try daemon.launch("com.example.tmp", ["exit", "0"])
        #expect(try daemon.wait(again.id).exit?.code == 0)
    }

    @Test("with two instances running, the first exit leaves tmp alone; the last empties it")
    func onlyTheLastExit() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.tmp2")
        let data = try daemon.dataContainer("com.example.tmp2")
        let long = try daemon.launch(
            "com.example.tmp2", ["home", "file", "tmp/in-use", "100", "sleep", "60"])
        #expect(daemon.eventually { access("\(data)/tmp/in-use", F_OK) == 0 })
        let short = try daemon.launch("com.example.tmp2", ["exit", "0"])
        #expect(try daemon.wait(short.id).exit?.code == 0)
        #expect(Self.entries("\(data)/tmp") == ["in-use"])
        try daemon.killAndWait(long.id)
        #expect(Self.entries("\(data)/tmp") == [])
    }

    @Test(
        "links the app planted in tmp (to /etc, to a root file and folder of the host) are removed, never followed"
    )
    func plantedLinks() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.tmplink")
        let data = try daemon.dataContainer("com.example.tmplink")
        // Root's files outside the container, which the app names but cannot see.
        let victim = "\(daemon.directory)/victim"
        try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: true)
        try "precious".write(toFile: "\(victim)/precious", atomically: true, encoding: .utf8)
        try "root's".write(toFile: "\(victim)-file", atomically: true, encoding: .utf8)
        let run = try daemon.launch(
            "com.example.tmplink",
            [
                "home", "link", "/etc", "tmp/etc", "link", victim, "tmp/folder", "link",
                "\(victim)-file", "tmp/file", "link", "\(victim)/precious", "tmp/precious",
                "mkdir", "tmp/sub", "link", victim, "tmp/sub/inner", "link", "..", "tmp/sub/up",
            ])
        #expect(try daemon.wait(run.id).exit?.code == 0)
        let output = try daemon.logs(run.id)
        #expect(output.components(separatedBy: " allowed").count == 8, "\(output)")
        #expect(Self.entries("\(data)/tmp") == [])
        #expect(Self.entries(victim) == ["precious"])
        #expect((try? String(contentsOfFile: "\(victim)/precious", encoding: .utf8)) == "precious")
        #expect((try? String(contentsOfFile: "\(victim)-file", encoding: .utf8)) == "root's")
        #expect(access("/etc/passwd", F_OK) == 0 && access("/etc/hostname", F_OK) == 0)
        // The daemon lives and the data container is still whole.
        _ = try daemon.client.get("/v1/version", as: APIDaemonInfo.self)
        #expect(Self.entries(data).contains("Documents"))
    }

    @Test(
        "after a daemon SIGKILL, a tmp left non-empty with no instance running is emptied by the next launch"
    )
    func emptiedAtLaunchAfterCrash() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.tmpcrash")
        let data = try daemon.dataContainer("com.example.tmpcrash")
        var owner = stat()
        #expect(lstat("\(data)/tmp", &owner) == 0)
        daemon.crash()
        // What the app left there while the crashed daemon could not see its exit.
        try FileManager.default.createDirectory(
            atPath: "\(data)/tmp/left/deeper", withIntermediateDirectories: true)
        FileManager.default.createFile(
            atPath: "\(data)/tmp/left/deeper/file", contents: Data("x".utf8))
        FileManager.default.createFile(atPath: "\(data)/tmp/top", contents: Data("x".utf8))
        for path in ["tmp/left", "tmp/left/deeper", "tmp/left/deeper/file", "tmp/top"] {
            #expect(chown("\(data)/\(path)", owner.st_uid, owner.st_gid) == 0)
        }
        try daemon.start()
        let run = try daemon.launch("com.example.tmpcrash", ["sleep", "30"])
        // Emptied before the launch, while the instance runs: not by its exit.
        #expect(Self.entries("\(data)/tmp") == [])
        #expect(try daemon.instance(run.id).state != .exited)
        try daemon.killAndWait(run.id)
    }

    @Test(
        "attack: a 20,000-level tree with FIFOs, sockets, links and mode-000 entries in tmp is emptied after the exit; the daemon answers within 1 s throughout"
    )
    func deepTreeInTmp() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.tmpdeep")
        let data = try daemon.dataContainer("com.example.tmpdeep")
        let watch = Responsiveness(daemon)
        let made = try daemon.launch("com.example.tmpdeep", ["deep-tree", "20000", "tmp"])
        // Landlock checks each mkdir against the whole path up: the app's own tree takes it a while.
        let ended = try AppdClient(socketPath: daemon.socket, timeout: 600)
            .get("/v1/instances/\(made.id)/wait", as: APIInstance.self)
        #expect(ended.exit?.code == 0)
        #expect(try daemon.logs(made.id).contains("deep-tree: value 20000"))
        // The wait ends once tmp is emptied.
        #expect(Self.entries("\(data)/tmp") == [])
        watch.expectResponsive("while the app built and appd removed 20,000 levels in tmp")
        try daemon.expectStillWorks("tmpdeep")
    }
}
