import AppdAPI
import Foundation
import Testing

/// Builds an .ipa from a bundle folder with Python's zipfile (stdlib, on every Debian host):
/// `Payload/Name.app/...` as iOS lays it out, plus what a store adds outside Payload/. `hostile`
/// names one way to break it; the patches after writing forge sizes and flags as a hostile
/// tool would, since no honest zip writer produces them.
func makeIPA(from bundle: String, to ipa: String, hostile: String = "") throws {
    let script = #"""
        import os, struct, sys, zipfile
        bundle, ipa, hostile = sys.argv[1:4]
        app = "Payload/" + os.path.basename(bundle.rstrip("/"))
        def add(z, name, data, mode=0o644, kind=0o100000, compress=zipfile.ZIP_DEFLATED):
            info = zipfile.ZipInfo(name)
            info.external_attr = (kind | mode) << 16
            info.create_system = 3
            info.compress_type = compress
            z.writestr(info, data)
        with zipfile.ZipFile(ipa, "w") as z:
            add(z, "iTunesMetadata.plist", b"<plist/>")
            add(z, app + "/", b"", 0o755, 0o040000)
            for top, dirs, files in os.walk(bundle):
                dirs.sort()
                rel = os.path.relpath(top, bundle)
                prefix = app + "/" + ("" if rel == "." else rel + "/")
                if rel != ".":
                    add(z, prefix, b"", 0o755, 0o040000)
                for f in sorted(files):
                    path = os.path.join(top, f)
                    with open(path, "rb") as h:
                        add(z, prefix + f, h.read(), os.stat(path).st_mode & 0o7777)
            if hostile == "traversal":
                add(z, app + "/../../evil", b"x")
            elif hostile == "absolute":
                add(z, "/etc/appd-evil", b"x")
            elif hostile == "symlink-out":
                add(z, app + "/link", b"../../../../etc/passwd", 0o777, 0o120000)
            elif hostile == "two-apps":
                add(z, "Payload/Other.app/Info.plist", b"<plist/>")
            elif hostile == "duplicate":
                add(z, app + "/Info.plist", b"<plist/>")
            elif hostile == "encrypted":
                add(z, app + "/secret", b"x" * 100, compress=zipfile.ZIP_STORED)
            elif hostile in ("bomb-declared", "bomb-ratio"):
                add(z, app + "/zeros", b"\0" * (8 << 20))
        if hostile == "no-payload":
            with zipfile.ZipFile(ipa, "w") as z:
                add(z, "Probe.app/Info.plist", b"<plist/>")
        def patch(entry, local, central, change):
            # Rewrites a field of one entry in its local header and its central directory record.
            data = bytearray(open(ipa, "rb").read())
            name = (app + "/" + entry).encode()
            for signature, offset in ((b"PK\x03\x04", local), (b"PK\x01\x02", central)):
                at = 0
                while True:
                    at = data.find(signature, at)
                    if at < 0: break
                    name_at = at + (30 if signature == b"PK\x03\x04" else 46)
                    if data[name_at:name_at + len(name)] == name:
                        change(data, at + offset)
                    at += 4
            open(ipa, "wb").write(bytes(data))
        if hostile in ("bomb-declared", "bomb-ratio"):
            # The uncompressed size of "zeros": smaller than what it inflates to, or absurdly
            # larger than what deflate can reach.
            forged = 4096 if hostile == "bomb-declared" else 0xFFFFFF00
            patch("zeros", 22, 24, lambda data, at: struct.pack_into("<I", data, at, forged))
        if hostile == "encrypted":
            # Bit 0 of the general purpose flags (Python's zipfile clears what it is given).
            def encrypt(data, at):
                data[at] |= 1
            patch("secret", 6, 8, encrypt)
        """#
    let result = try runTool("/usr/bin/python3", ["-c", script, bundle, ipa, hostile])
    guard result.code == 0 else { throw DaemonFailure("making \(ipa): \(result.output)") }
}

@Suite("install formats: .ipa, tar, stdin", .serialized, rootOnly)
struct InstallFormatTests {
    /// Nothing of a refused install anywhere in the state root.
    static func expectNothingInstalled(
        _ daemon: TestDaemon, _ what: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        for directory in ["Containers/Bundle", "Containers/Data", "staging", "incoming"] {
            func entries() -> [String] {
                (try? FileManager.default.contentsOfDirectory(atPath: "\(daemon.root)/\(directory)"))
                    ?? []
            }
            var left = entries()
            // A refusal the client found itself (a zip bomb in the .ipa it converts) ends its
            // upload without the last chunk and exits at once; the daemon removes what it had
            // received when it sees the body break off, which may be a moment later.
            let deadline = Date().addingTimeInterval(5)
            while directory == "incoming" && !left.isEmpty && Date() < deadline {
                usleep(20_000)
                left = entries()
            }
            #expect(
                left.isEmpty, "\(what): \(directory) holds \(left)", sourceLocation: sourceLocation)
        }
        #expect(
            try daemon.client.get("/v1/apps", as: [APIApp].self).isEmpty, "\(what)",
            sourceLocation: sourceLocation)
    }

    @Test("a signed .ipa installs through the daemon and its app launches")
    func ipaInstallsAndLaunches() throws {
        let daemon = try TestDaemon()
        let bundle = try daemon.makeProbe("com.example.ipa")
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
        let ipa = "\(daemon.directory)/Probe.ipa"
        try makeIPA(from: bundle, to: ipa)
        let result = try daemon.run("appd", ["install", ipa])
        #expect(result.code == 0, "\(result.output)")
        #expect(result.output.contains("Installed com.example.ipa"), "\(result.output)")
        let app = try daemon.client.get("/v1/apps/com.example.ipa", as: APIApp.self)
        #expect(app.bundlePath?.hasSuffix("/Probe.app") == true)
        // Outside Payload/: not part of the app.
        #expect(
            !FileManager.default.fileExists(
                atPath: "\(try #require(app.bundlePath))/iTunesMetadata.plist"))
        let instance = try daemon.launch("com.example.ipa", ["exit", "0"])
        #expect(try daemon.wait(instance.id).exit?.code == 0)
    }

    @Test(
        "hostile .ipas are refused, naming the file and the problem, and leave nothing in the state root",
        arguments: [
            ("traversal", "'..' component"), ("absolute", "absolute path"),
            ("symlink-out", "leads out of the app"),
            ("two-apps", "more than one app"), ("no-payload", "no Payload/Name.app"),
            ("duplicate", "appears twice"),
            ("encrypted", "is encrypted or its central directory is corrupt"),
            ("bomb-declared", "zip bomb"), ("bomb-ratio", "zip bomb"),
        ])
    func hostileIPAs(_ hostile: String, _ expected: String) throws {
        let daemon = try TestDaemon()
        let bundle = try daemon.makeProbe("com.example.hostile")
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
        let ipa = "\(daemon.directory)/Hostile-\(hostile).ipa"
        try makeIPA(from: bundle, to: ipa, hostile: hostile)
        let result = try daemon.run("appd", ["install", ipa])
        #expect(result.code == 1, "\(hostile): \(result.output)")
        #expect(result.output.contains(ipa), "\(hostile): \(result.output)")
        #expect(result.output.contains(expected), "\(hostile): \(result.output)")
        try Self.expectNothingInstalled(daemon, hostile)
    }

    @Test("appd install --no-daemon takes an .ipa too, and refuses a hostile one leaving nothing")
    func ipaInProcess() throws {
        let daemon = try TestDaemon()
        daemon.stop()
        let bundle = try daemon.makeProbe("com.example.local")
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
        let environment = [
            "APPD_ROOT": daemon.root, "APPD_CONFIG": daemon.configPath, "PATH": "/usr/bin:/bin",
        ]
        let hostile = "\(daemon.directory)/Hostile.ipa"
        try makeIPA(from: bundle, to: hostile, hostile: "symlink-out")
        let refused = try TestDaemon.run(
            "appd", ["install", "--no-daemon", hostile], environment: environment)
        #expect(refused.code == 1, "\(refused.output)")
        #expect(refused.output.contains("leads out of the app"), "\(refused.output)")

        let ipa = "\(daemon.directory)/Probe.ipa"
        try makeIPA(from: bundle, to: ipa)
        let result = try TestDaemon.run(
            "appd", ["install", "--no-daemon", ipa], environment: environment)
        #expect(result.code == 0, "\(result.output)")
        let list = try TestDaemon.run("appd", ["list", "--no-daemon"], environment: environment)
        #expect(list.output.contains("com.example.local"), "\(list.output)")
        #expect(
            ((try? FileManager.default.contentsOfDirectory(atPath: "\(daemon.root)/incoming")) ?? [])
                .isEmpty)
        try daemon.start()
    }

    @Test(
        "a tar of the bundle's contents installs from a file and from stdin; stdin takes an .ipa as well"
    )
    func tarAndStdin() throws {
        let daemon = try TestDaemon()
        let bundle = try daemon.makeProbe("com.example.tar")
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
        let tar = "\(daemon.directory)/Probe.tar"
        let made = try runTool("/usr/bin/tar", ["-C", bundle, "-cf", tar, "."])
        #expect(made.code == 0, "\(made.output)")
        let fromFile = try daemon.run("appd", ["install", tar])
        #expect(fromFile.code == 0, "\(fromFile.output)")
        #expect(
            try daemon.client.get("/v1/apps/com.example.tar", as: APIApp.self).bundlePath?
                .hasSuffix("/Probe.app") == true)

        let environment = ["APPD_ROOT": daemon.root, "PATH": "/usr/bin:/bin"]
        let noName = try runTool("appd", ["install", "-"], stdin: tar, environment: environment)
        #expect(noName.code != 0)
        #expect(noName.output.contains("--name"), "\(noName.output)")
        let fromStdin = try runTool(
            "appd", ["install", "--name", "Probe.app", "-"], stdin: tar, environment: environment)
        #expect(fromStdin.code == 0, "\(fromStdin.output)")
        #expect(fromStdin.output.contains("Reinstalled com.example.tar"), "\(fromStdin.output)")

        let ipa = "\(daemon.directory)/Probe.ipa"
        try makeIPA(from: bundle, to: ipa)
        let ipaFromStdin = try runTool(
            "appd", ["install", "-"], stdin: ipa, environment: environment)
        #expect(ipaFromStdin.code == 0, "\(ipaFromStdin.output)")

        let junk = "\(daemon.directory)/junk.bin"
        try Data(repeating: 7, count: 4096).write(to: URL(fileURLWithPath: junk))
        let refused = try daemon.run("appd", ["install", junk])
        #expect(refused.code == 1)
        #expect(
            refused.output.contains("neither a folder, nor a zip (.ipa), nor a tar"),
            "\(refused.output)")
        let instance = try daemon.launch("com.example.tar", ["exit", "0"])
        #expect(try daemon.wait(instance.id).exit?.code == 0)
    }

    @Test(
        "a gzip'd tar installs as .tar.gz, .tgz and on stdin (told by its magic); a corrupt or truncated one is refused by name"
    )
    func gzippedTar() throws {
        let daemon = try TestDaemon()
        let bundle = try daemon.makeProbe("com.example.tgz")
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
        let tarGz = "\(daemon.directory)/Probe.tar.gz"
        #expect(try runTool("/usr/bin/tar", ["-C", bundle, "-czf", tarGz, "."]).code == 0)
        let fromFile = try daemon.run("appd", ["install", tarGz])
        #expect(fromFile.code == 0, "\(fromFile.output)")
        #expect(
            try daemon.client.get("/v1/apps/com.example.tgz", as: APIApp.self).bundlePath?
                .hasSuffix("/Probe.app") == true)
        let tgz = "\(daemon.directory)/Probe.tgz"
        #expect(link(tarGz, tgz) == 0)
        let fromTgz = try daemon.run("appd", ["install", tgz])
        #expect(fromTgz.output.contains("Reinstalled com.example.tgz"), "\(fromTgz.output)")
        let environment = ["APPD_ROOT": daemon.root, "PATH": "/usr/bin:/bin"]
        let fromStdin = try runTool(
            "appd", ["install", "--name", "Probe.app", "-"], stdin: tarGz, environment: environment)
        #expect(fromStdin.output.contains("Reinstalled com.example.tgz"), "\(fromStdin.output)")

        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: tarGz)))
        let truncated = "\(daemon.directory)/Truncated.tar.gz"
        try Data(bytes.prefix(bytes.count / 2)).write(to: URL(fileURLWithPath: truncated))
        let cut = try daemon.run("appd", ["install", truncated])
        #expect(cut.code == 1)
        #expect(cut.output.contains("\(truncated): the gzip stream is truncated"), "\(cut.output)")
        for index in stride(from: 40, to: bytes.count - 8, by: 97) { bytes[index] ^= 0x5A }
        let corrupt = "\(daemon.directory)/Corrupt.tar.gz"
        try Data(bytes).write(to: URL(fileURLWithPath: corrupt))
        let bad = try daemon.run("appd", ["install", corrupt])
        #expect(bad.code == 1)
        #expect(bad.output.contains("\(corrupt)"), "\(bad.output)")
        let gzippedJunk = "\(daemon.directory)/junk.gz"
        #expect(
            try runTool("/bin/sh", ["-c", "head -c 4096 /dev/zero | gzip > \(gzippedJunk)"]).code
                == 0)
        let notTar = try daemon.run("appd", ["install", gzippedJunk])
        #expect(
            notTar.output.contains("is gzip'd, but what it holds is not a tar archive"),
            "\(notTar.output)")
        #expect(try daemon.client.get("/v1/instances?all=1", as: [APIInstance].self).isEmpty)
    }

    @Test(
        "a tar of the folder (X.app/ at its top) is refused with the command that makes the right one"
    )
    func tarOfTheFolder() throws {
        let daemon = try TestDaemon()
        let bundle = try daemon.makeProbe("com.example.nested")
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
        let tar = "\(daemon.directory)/Nested.tar"
        let parent = (bundle as NSString).deletingLastPathComponent
        #expect(try runTool("/usr/bin/tar", ["-C", parent, "-cf", tar, "Probe.app"]).code == 0)
        let refused = try daemon.run("appd", ["install", tar])
        #expect(refused.code == 1)
        #expect(
            refused.output.contains(
                "it holds Probe.app/ with one: the archive was made of the folder rather than of its contents (make it with tar -C Probe.app -cf Probe.tar . , or install Probe.app itself)"
            ),
            "\(refused.output)")
    }
}

@Suite("install progress on a terminal", .serialized, rootOnly)
struct InstallProgressTests {
    @Test(
        "one progress line on a terminal (files, bytes, percent), erased at the end; none with --json or into a pipe"
    )
    func progressOnTerminalOnly() throws {
        let daemon = try TestDaemon()
        let bundle = try daemon.makeProbe("com.example.progress")
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
        let environment = ["APPD_ROOT": daemon.root, "PATH": "/usr/bin:/bin", "TERM": "dumb"]
        // script(1) gives appd a terminal as stdout and stderr.
        func onTerminal(_ arguments: String) throws -> (code: Int32, output: String) {
            try runTool(
                "/usr/bin/script",
                ["-qec", "\(builtExecutable("appd")) install \(arguments)", "/dev/null"],
                environment: environment)
        }
        let tty = try onTerminal(bundle)
        #expect(tty.code == 0, "\(tty.output)")
        #expect(
            tty.output.contains("\r\u{1B}[Ksending 5/5 files"), "\(tty.output.debugDescription)")
        #expect(tty.output.contains("(100%)"), "\(tty.output.debugDescription)")
        #expect(tty.output.contains("sent 5 files"), "\(tty.output.debugDescription)")
        #expect(
            tty.output.contains("appd is verifying and sealing the bundle"),
            "\(tty.output.debugDescription)")

        let json = try onTerminal("--json \(bundle)")
        #expect(json.code == 0, "\(json.output)")
        #expect(!json.output.contains("sending"), "\(json.output.debugDescription)")
        let pipe = try daemon.run("appd", ["install", bundle])
        #expect(pipe.code == 0, "\(pipe.output)")
        #expect(
            !pipe.output.contains("sending") && !pipe.output.contains("\u{1B}"),
            "\(pipe.output.debugDescription)")
    }
}
