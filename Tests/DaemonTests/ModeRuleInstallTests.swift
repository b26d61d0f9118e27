import AppdAPI
import AppdClient
import Foundation
import Testing

/// Issue 13 §7: `appd install` through the daemon accepted setuid and world-writable files (the
/// client's tar dropped the bits, the extractor normalized them) while `appd verify` and
/// `--no-daemon` refused them. Now all three refuse, naming the file.
@Suite(
    "setuid, world-writable and hard-linked files: refused on every install path", .serialized,
    rootOnly)
struct ModeRuleInstallTests {
    static let cases: [(mode: mode_t, problem: String)] = [
        (0o4755, "is setuid or setgid"), (0o2755, "is setuid or setgid"),
        (0o757, "is world-writable"),
    ]

    @Test(
        "appd verify, appd install --no-daemon and appd install through the daemon refuse the same file with the same words"
    )
    func threePaths() throws {
        let daemon = try TestDaemon()
        for (index, (mode, problem)) in Self.cases.enumerated() {
            let id = "com.example.mode\(index)"
            let bundle = try daemon.makeProbe(id)
            try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
            chmod("\(bundle)/Probe", mode)

            let verify = try daemon.run("appd", ["verify", bundle])
            #expect(verify.code != 0)
            #expect(verify.output.contains("Probe: \(problem)"), "verify: \(verify.output)")

            let local = try daemon.run("appd", ["install", "--no-daemon", bundle])
            #expect(local.code != 0)
            #expect(local.output.contains("Probe: \(problem)"), "--no-daemon: \(local.output)")

            let remote = try daemon.run("appd", ["install", bundle])
            #expect(remote.code != 0)
            #expect(
                remote.output.contains("entry 'Probe' \(problem)"),
                "through the daemon: \(remote.output)")
            #expect(try daemon.client.get("/v1/apps", as: [APIApp].self).isEmpty)
        }
        try daemon.expectStillWorks("modes")
    }

    @Test(
        "a hand-made tar with a setuid executable, sent to the daemon's socket, is refused naming the file"
    )
    func craftedArchive() throws {
        let daemon = try TestDaemon()
        let bundle = try daemon.makeProbe("com.example.crafted")
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
        let sent = try Self.sendCraftedTar(daemon, bundle: bundle, setuid: "Probe")
        let lines = sent.output.split(separator: "\n")
        #expect(lines.last == "400", "\(sent.output)")
        #expect(sent.output.contains("entry 'Probe' is setuid or setgid"), "\(sent.output)")
        #expect(sent.output.contains("invalidBundle"), "\(sent.output)")
        #expect(try daemon.client.get("/v1/apps", as: [APIApp].self).isEmpty)
        try daemon.expectStillWorks("crafted-archive")
    }

    @Test(
        "a file with two links: appd verify, install --no-daemon and install through the daemon (the client's tar) refuse it with the same words"
    )
    func hardLinks() throws {
        let daemon = try TestDaemon()
        let bundle = try daemon.makeProbe("com.example.linked")
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
        // Its other name is outside the bundle: whoever holds it could change the file after
        // it was verified.
        #expect(link("\(bundle)/Probe", "\(daemon.directory)/Probe-elsewhere") == 0)
        let problem = "Probe: has 2 hard links; bundle files must have one"
        for (label, arguments) in [
            ("verify", ["verify", bundle]), ("--no-daemon", ["install", "--no-daemon", bundle]),
            ("through the daemon", ["install", bundle]),
        ] {
            let result = try daemon.run("appd", arguments)
            #expect(result.code != 0, "\(label) accepted it: \(result.output)")
            #expect(result.output.contains(problem), "\(label): \(result.output)")
        }
        #expect(try daemon.client.get("/v1/apps", as: [APIApp].self).isEmpty)
        try daemon.expectStillWorks("hard-links")
    }

    @Test(
        "a hand-made tar with a hard-link entry, sent to the daemon's socket, is refused naming it")
    func craftedHardLink() throws {
        let daemon = try TestDaemon()
        let bundle = try daemon.makeProbe("com.example.crafted-link")
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
        #expect(link("\(bundle)/Probe", "\(bundle)/Probe2") == 0)
        // Python's tarfile writes the second name of an inode as a hard-link entry (type 1).
        let sent = try Self.sendCraftedTar(daemon, bundle: bundle)
        #expect(sent.output.split(separator: "\n").last == "400", "\(sent.output)")
        #expect(sent.output.contains("entry 'Probe2' is a hard link"), "\(sent.output)")
        #expect(try daemon.client.get("/v1/apps", as: [APIApp].self).isEmpty)
        try daemon.expectStillWorks("crafted-hard-link")
    }

    /// The bundle as an attacker's tool would send it: a tar written by Python's tarfile (which
    /// writes the mode it is given, and a second name of an inode as a hard-link entry), posted
    /// to the daemon's socket with curl. `setuid` names an entry written with mode 4755.
    static func sendCraftedTar(_ daemon: TestDaemon, bundle: String, setuid: String = "")
        throws -> (code: Int32, output: String)
    {
        let tar = "\(daemon.directory)/crafted.tar"
        let make = try TestDaemon.run(
            "/usr/bin/python3",
            [
                "-c",
                """
                import os, sys, tarfile
                bundle, out, setuid = sys.argv[1], sys.argv[2], sys.argv[3]
                with tarfile.open(out, "w", format=tarfile.USTAR_FORMAT) as tar:
                    for root, dirs, files in os.walk(bundle):
                        for name in sorted(dirs + files):
                            path = os.path.join(root, name)
                            info = tar.gettarinfo(path, os.path.relpath(path, bundle))
                            if info.name == setuid:
                                info.mode = 0o4755
                            tar.addfile(info, open(path, "rb") if info.isfile() else None)
                """, bundle, tar, setuid,
            ])
        #expect(make.code == 0, "\(make.output)")
        return try TestDaemon.run(
            "/usr/bin/curl",
            [
                "-s", "-w", "\n%{http_code}", "--unix-socket", daemon.socket,
                "-H", "Content-Type: application/x-tar", "--data-binary", "@\(tar)",
                "http://appd/v1/apps?name=Probe.app",
            ])
    }
}
