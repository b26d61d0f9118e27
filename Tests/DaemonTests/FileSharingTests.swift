import AppdAPI
import AppdClient
import Foundation
import Testing

/// File sharing (issue 27 §6): `appctl files` on an app whose Info.plist has
/// `UIFileSharingEnabled` = YES, through a real daemon. The daemon works as root in a folder a
/// real sandboxed app controls, so the attacks are the app's: links it planted, a folder it
/// swaps for a link while the client works, names that climb out, a file larger than its room.
@Suite("appctl files: an app's Documents shared", .serialized, rootOnly)
struct FileSharingTests {
    static let sharing = "<key>UIFileSharingEnabled</key><true/>"

    static func entries(_ path: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }

    /// Runs the probe with `steps` to its end and returns its output.
    static func app(_ daemon: TestDaemon, _ id: String, _ steps: [String]) throws -> String {
        let run = try daemon.launch(id, ["home"] + steps)
        #expect(try daemon.wait(run.id).exit?.code == 0)
        return try daemon.logs(run.id)
    }

    static func bytes(_ count: Int, seed: UInt8) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) ^ seed })
    }

    @Test("list, put, get and rm round-trip; a put lands whole, owned by the app, mode 0600")
    func roundTrip() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.share", info: Self.sharing)
        let output = try Self.app(
            daemon, "com.example.share",
            ["file", "Documents/doc", "1000", "mkdir", "Documents/sub"])
        #expect(output.components(separatedBy: " allowed").count == 3, "\(output)")
        let data = try daemon.dataContainer("com.example.share")
        let uid = try daemon.client.app("com.example.share").uid

        let list = try daemon.run("appctl", ["files", "com.example.share"])
        #expect(list.code == 0, "\(list.output)")
        #expect(list.output.contains("file") && list.output.contains("doc"), "\(list.output)")
        #expect(list.output.contains("directory") && list.output.contains("sub"), "\(list.output)")

        let content = Self.bytes(300_000, seed: 7)
        let local = "\(daemon.directory)/local.bin"
        try content.write(to: URL(fileURLWithPath: local))
        let put = try daemon.run(
            "appctl", ["files", "put", "com.example.share", local, "sub/x.bin"])
        #expect(put.code == 0, "\(put.output)")
        #expect(put.output.contains("Documents/sub/x.bin written"), "\(put.output)")
        var st = stat()
        #expect(lstat("\(data)/Documents/sub/x.bin", &st) == 0)
        #expect(st.st_uid == uid && st.st_gid == uid && st.st_mode & 0o7777 == 0o600)
        #expect(Self.entries("\(data)/Documents/sub") == ["x.bin"])  // no temporary left

        let json = try daemon.run("appctl", ["files", "--json", "com.example.share"])
        let listed = try APICoding.decoder().decode(APIFileList.self, from: Data(json.output.utf8))
        #expect(listed.complete)
        #expect(listed.files.map(\.path) == ["doc", "sub", "sub/x.bin"], "\(listed)")
        #expect(listed.files.first { $0.path == "sub/x.bin" }?.size == 300_000)

        let copy = "\(daemon.directory)/copy.bin"
        let get = try daemon.run(
            "appctl", ["files", "get", "com.example.share", "sub/x.bin", "-o", copy])
        #expect(get.code == 0, "\(get.output)")
        #expect(FileManager.default.contents(atPath: copy) == content)
        let stdout = try daemon.run("appctl", ["files", "get", "com.example.share", "doc"])
        #expect(stdout.output == String(repeating: "x", count: 1000))

        // A put over an existing file replaces it.
        let again = try daemon.run(
            "appctl", ["files", "put", "com.example.share", local, "sub/x.bin"])
        #expect(again.code == 0, "\(again.output)")
        let rm = try daemon.run("appctl", ["files", "rm", "com.example.share", "sub"])
        #expect(rm.code == 0, "\(rm.output)")
        #expect(rm.output.contains("removed (directory)"), "\(rm.output)")
        #expect(Self.entries("\(data)/Documents") == ["doc"])
        let missing = try daemon.run("appctl", ["files", "get", "com.example.share", "sub/x.bin"])
        #expect(missing.code == 1 && missing.output.contains("no such file"), "\(missing.output)")
    }

    @Test("an app without UIFileSharingEnabled is refused, the error naming the key")
    func notSharingRefused() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.private")
        _ = try Self.app(daemon, "com.example.private", ["file", "Documents/secret", "10"])
        let local = "\(daemon.directory)/in"
        try Data("in".utf8).write(to: URL(fileURLWithPath: local))
        for arguments in [
            ["files", "com.example.private"],
            ["files", "get", "com.example.private", "secret"],
            ["files", "put", "com.example.private", local, "new"],
            ["files", "rm", "com.example.private", "secret"],
        ] {
            let result = try daemon.run("appctl", arguments)
            #expect(result.code == 1, "\(arguments): \(result.output)")
            #expect(result.output.contains("UIFileSharingEnabled"), "\(result.output)")
        }
        let data = try daemon.dataContainer("com.example.private")
        #expect(Self.entries("\(data)/Documents") == ["secret"])
    }

    @Test(
        "a caller without the control right is refused file sharing (403 naming ControlAllowed), and one without the admin right appd reclaim-caches"
    )
    func rightsChecked() throws {
        let daemon = try TestDaemon(config: "[API]\nSocketMode=0666\n")
        try daemon.installProbe("com.example.guarded", info: Self.sharing)
        _ = try Self.app(daemon, "com.example.guarded", ["file", "Documents/doc", "10"])
        func asNobody(_ tool: String, _ arguments: [String]) throws -> (code: Int32, output: String)
        {
            try daemon.run(
                "/usr/bin/setpriv",
                [
                    "--reuid=65534", "--regid=65534", "--clear-groups", builtExecutable(tool),
                    "--socket", daemon.socket,
                ] + arguments)
        }
        for arguments in [
            ["files", "com.example.guarded"], ["files", "get", "com.example.guarded", "doc"],
            ["files", "rm", "com.example.guarded", "doc"],
        ] {
            let result = try asNobody("appctl", arguments)
            #expect(result.code == 1, "\(arguments): \(result.output)")
            #expect(result.output.contains("ControlAllowed"), "\(result.output)")
        }
        let reclaim = try asNobody("appd", ["reclaim-caches"])
        #expect(reclaim.code == 1 && reclaim.output.contains("AdminAllowed"), "\(reclaim.output)")
        let data = try daemon.dataContainer("com.example.guarded")
        #expect(Self.entries("\(data)/Documents") == ["doc"])
    }

    @Test("links the app planted in Documents are never followed by get, put or rm")
    func plantedLinks() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.linker", info: Self.sharing)
        let secret = "\(daemon.directory)/secret"
        try Data("host secret".utf8).write(to: URL(fileURLWithPath: secret))
        let victim = "\(daemon.directory)/victim"
        try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: true)
        try Data("host file".utf8).write(to: URL(fileURLWithPath: "\(victim)/file"))
        let output = try Self.app(
            daemon, "com.example.linker",
            ["link", secret, "Documents/leak", "link", victim, "Documents/dir"])
        #expect(output.components(separatedBy: " allowed").count == 3, "\(output)")
        let local = "\(daemon.directory)/payload"
        try Data("payload".utf8).write(to: URL(fileURLWithPath: local))

        for (arguments, what) in [
            (["files", "get", "com.example.linker", "leak"], "symbolic link"),
            (["files", "get", "com.example.linker", "dir/file"], "symbolic link"),
            (["files", "put", "com.example.linker", local, "leak"], "symbolic link"),
            (["files", "put", "com.example.linker", local, "dir/new"], "symbolic link"),
            (["files", "rm", "com.example.linker", "dir/file"], "symbolic link"),
        ] {
            let result = try daemon.run("appctl", arguments)
            #expect(result.code == 1, "\(arguments): \(result.output)")
            #expect(result.output.contains(what), "\(arguments): \(result.output)")
            #expect(!result.output.contains("host secret") && !result.output.contains("host file"))
        }
        #expect(try String(contentsOfFile: secret, encoding: .utf8) == "host secret")
        #expect(Self.entries(victim) == ["file"])
        #expect(try String(contentsOfFile: "\(victim)/file", encoding: .utf8) == "host file")

        let list = try daemon.run("appctl", ["files", "--json", "com.example.linker"])
        let listed = try APICoding.decoder().decode(APIFileList.self, from: Data(list.output.utf8))
        #expect(listed.files.map(\.kind) == ["link", "link"], "\(listed)")
        // Removing a link removes the link, not what it names.
        let rm = try daemon.run("appctl", ["files", "rm", "com.example.linker", "leak"])
        #expect(rm.code == 0 && rm.output.contains("removed (link)"), "\(rm.output)")
        #expect(FileManager.default.fileExists(atPath: secret))
    }

    @Test("absolute paths, '..' and '.' components and NUL bytes are refused before any file work")
    func climbingNamesRefused() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.climb", info: Self.sharing)
        _ = try Self.app(daemon, "com.example.climb", ["mkdir", "Documents/a"])
        let local = "\(daemon.directory)/payload"
        try Data("payload".utf8).write(to: URL(fileURLWithPath: local))
        let data = try daemon.dataContainer("com.example.climb")
        for (path, why) in [
            ("../Library/Preferences/x", "'..' component"), ("/etc/passwd", "is absolute"),
            ("a/../../../../etc/passwd", "'..' component"), ("./a", "'.' component"),
            ("..", "'..' component"),
        ] {
            for arguments in [
                ["files", "get", "com.example.climb", path],
                ["files", "put", "com.example.climb", local, path],
                ["files", "rm", "com.example.climb", path],
            ] {
                let result = try daemon.run("appctl", arguments)
                #expect(result.code == 1, "\(arguments): \(result.output)")
                #expect(result.output.contains(why), "\(arguments): \(result.output)")
            }
        }
        let nul = try daemon.client.send(
            "DELETE", "/v1/apps/com.example.climb/files/content?path=a%00b")
        #expect(nul.status == 400, "\(String(decoding: nul.body, as: UTF8.self))")
        #expect(Self.entries("\(data)/Documents") == ["a"])
        #expect(Self.entries("\(data)/Library/Preferences") == [])
    }

    @Test(
        "an app that flips a folder and a link to a host folder while the client gets and puts through it never steers the daemon there"
    )
    func swapRace() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.swapper", info: Self.sharing)
        let victim = "\(daemon.directory)/victim"
        try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: true)
        try Data("host".utf8).write(to: URL(fileURLWithPath: "\(victim)/inside"))
        let run = try daemon.launch(
            "com.example.swapper",
            [
                "home", "mkdir", "Documents/flip", "file", "Documents/flip/inside", "100",
                "swap", "Documents/flip", victim, "100000000",
            ])
        #expect(
            daemon.eventually {
                (try? daemon.logs(run.id))?.contains("Documents/flip/inside allowed") == true
            })
        let client = daemon.client
        var (gotApp, gotRefused, putApp, putRefused) = (0, 0, 0, 0)
        let rounds = 300
        for round in 0..<rounds {
            var got = Data()
            do {
                try client.downloadFile(
                    "com.example.swapper", path: "flip/inside",
                    onData: { got.append(contentsOf: $0) })
                #expect(got == Data(repeating: 0x78, count: 100), "round \(round): \(got)")
                gotApp += 1
            } catch {
                #expect("\(error)".contains("symbolic link"), "\(error)")
                gotRefused += 1
            }
            do {
                _ = try client.uploadFile("com.example.swapper", path: "flip/put-\(round)") {
                    write in
                    try Data("from the client".utf8).withUnsafeBytes { try write($0) }
                }
                putApp += 1
            } catch {
                // Caught as a link, or (the link check lost the race) as "not a folder".
                #expect(
                    "\(error)".contains("symbolic link") || "\(error)".contains("not a folder"),
                    "\(error)")
                putRefused += 1
            }
        }
        let swapping = try daemon.instance(run.id).state.isLive
        try daemon.killAndWait(run.id)
        // The host folder is as it was: nothing was read from it, nothing written into it.
        #expect(Self.entries(victim) == ["inside"])
        #expect(try String(contentsOfFile: "\(victim)/inside", encoding: .utf8) == "host")
        // The app was still swapping at the end, and both outcomes happened (else it was no race).
        #expect(swapping, "the app stopped swapping before the client's rounds ended")
        #expect(gotApp + gotRefused == rounds && putApp + putRefused == rounds)
        #expect(gotRefused > 0 && putRefused > 0, "refused \(gotRefused) gets, \(putRefused) puts")
        print(
            "swap race: \(rounds) rounds: gets \(gotApp) served, \(gotRefused) refused; puts \(putApp) written, \(putRefused) refused"
        )
    }

    @Test(
        "a put larger than the state root's filesystem has room for is refused with 413 and leaves nothing; the old file stays"
    )
    func hugePutRefused() throws {
        let fs = try LoopFilesystem(sizeMiB: 48, quota: false)
        let daemon = try TestDaemon(root: "\(fs.mountPoint)/root")
        defer {
            withExtendedLifetime(daemon) {}
            withExtendedLifetime(fs) {}
        }
        try daemon.installProbe("com.example.big", info: Self.sharing)
        _ = try Self.app(daemon, "com.example.big", ["file", "Documents/big", "1000"])
        let data = try daemon.dataContainer("com.example.big")
        let local = "\(daemon.directory)/huge"
        try Self.bytes(96 << 20, seed: 3).write(to: URL(fileURLWithPath: local))
        var before = statvfs()
        #expect(statvfs(fs.mountPoint, &before) == 0)
        let put = try daemon.run("appctl", ["files", "put", "com.example.big", local, "big"])
        #expect(put.code == 1, "\(put.output)")
        #expect(put.output.contains("does not fit"), "\(put.output)")
        #expect(Self.entries("\(data)/Documents") == ["big"])
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(data)/Documents/big")).count == 1000)
        var after = statvfs()
        #expect(statvfs(fs.mountPoint, &after) == 0)
        // The partial file's blocks came back (a few blocks of slack for the registry's journal).
        #expect(
            Int(after.f_bfree) >= Int(before.f_bfree) - 64, "\(before.f_bfree) \(after.f_bfree)")
        // The daemon lowered CAP_SYS_RESOURCE for its writes: it stopped where an app stops,
        // short of ext4's blocks reserved for root (5%, 2.4 MiB here), which stay appd's own.
        let stopped = try #require(
            put.output.split(separator: "stopped after ").last?.split(separator: " ").first
                .flatMap { Int($0) }, "\(put.output)")
        let available = Int(before.f_bavail) * Int(before.f_frsize)
        let reserved = (Int(before.f_bfree) - Int(before.f_bavail)) * Int(before.f_frsize)
        #expect(reserved >= 2 << 20)
        #expect(stopped <= available + (512 << 10), "wrote \(stopped), \(available) available")
        // And the daemon still works on that filesystem.
        let small = "\(daemon.directory)/small"
        try Data("small".utf8).write(to: URL(fileURLWithPath: small))
        let ok = try daemon.run("appctl", ["files", "put", "com.example.big", small, "small"])
        #expect(ok.code == 0, "\(ok.output)")
    }

    @Test(
        "a put past the app's DataQuota is refused with 413 naming it and leaves nothing",
        .enabled(
            if: LoopFilesystem.kernelHasQuota,
            "the kernel lacks CONFIG_QUOTA or CONFIG_QFMT_V2: ext4 cannot mount a filesystem with the quota feature"
        ))
    func quotaBindsPuts() throws {
        let fs = try LoopFilesystem(sizeMiB: 160, quota: true)
        let daemon = try TestDaemon(
            config: "[Sandbox]\nDataQuota=8M\n", root: "\(fs.mountPoint)/root")
        defer {
            withExtendedLifetime(daemon) {}
            withExtendedLifetime(fs) {}
        }
        try daemon.installProbe("com.example.quota", info: Self.sharing)
        let data = try daemon.dataContainer("com.example.quota")
        let local = "\(daemon.directory)/huge"
        try Self.bytes(16 << 20, seed: 5).write(to: URL(fileURLWithPath: local))
        let put = try daemon.run("appctl", ["files", "put", "com.example.quota", local, "huge"])
        #expect(put.code == 1, "\(put.output)")
        #expect(put.output.contains("DataQuota"), "\(put.output)")
        #expect(Self.entries("\(data)/Documents") == [])
    }
}
