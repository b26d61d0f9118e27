import AppdAPI
import Foundation
import TestSupport
import Testing

/// Issue 38 through the daemon: `appd install` as a user runs it, the real daemon deciding.
@Suite("what a bundle's programs need, through the daemon", .serialized, rootOnly)
struct DaemonProgramCheckTests {
    @Test("a program that finds its library in Frameworks/ installs and runs in the sandbox")
    func frameworksRun() throws {
        let daemon = try TestDaemon()
        let bundle = try ProgramBundle.frameworks.write(
            in: "\(daemon.directory)/src-frameworks", id: "com.example.frameworks")
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
        let result = try daemon.run("appd", ["install", bundle])
        #expect(result.code == 0, "\(result.output)")
        let instance = try daemon.launch("com.example.frameworks", [])
        _ = try daemon.wait(instance.id)
        #expect(try daemon.logs(instance.id).contains(ProgramBundle.frameworksOutput))
    }

    @Test(
        "another machine's program, a missing library and a truncated ELF are refused with one line naming the file"
    )
    func refused() throws {
        let daemon = try TestDaemon()
        let cases: [(ProgramBundle, String)] = [
            (
                .otherMachine,
                "Prog.app cannot run on this host: Prog: is built for arm64; this host is amd64"
            ),
            (
                .missingLibrary,
                "Prog.app cannot run on this host: Prog: needs the library libgreet.so, found neither in the bundle nor on this host"
            ),
            (.truncated, "Prog: is a malformed ELF file: offset 64: the program header table"),
        ]
        for (kind, expected) in cases {
            let bundle = try kind.write(
                in: "\(daemon.directory)/src-\(kind.rawValue)", id: "com.example.\(kind.rawValue)")
            // appd sign refuses a malformed ELF file as install does: that one goes unsigned, and
            // the daemon refuses it on reading, before the signature.
            if kind != .truncated {
                try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
            }
            let result = try daemon.run("appd", ["install", bundle])
            #expect(result.code == 1, "\(kind): \(result.output)")
            #expect(result.output.contains(expected), "\(kind): \(result.output)")
            #expect(!result.output.contains("incoming"), "\(result.output)")
        }
        let list = try daemon.run("appd", ["list"])
        #expect(!list.output.contains("com.example"), "\(list.output)")
    }

    @Test(
        "a script is installed only when AppdHostExecutables names its interpreter; then it runs"
    )
    func scriptInterpreter() throws {
        let daemon = try TestDaemon()
        let unnamed = try ProgramBundle.script.write(
            in: "\(daemon.directory)/src-unnamed", id: "com.example.unnamed")
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, unnamed])
        let refused = try daemon.run("appd", ["install", unnamed])
        #expect(refused.code == 1, "\(refused.output)")
        #expect(
            refused.output.contains(
                "Prog.app cannot run on this host: Prog: runs through its interpreter /bin/sh (#!), which AppdHostExecutables in Info.plist does not name"
            ) && refused.output.contains("add /bin/sh to AppdHostExecutables"),
            "\(refused.output)")
        #expect(!(try daemon.run("appd", ["list"]).output.contains("com.example.unnamed")))

        let named = try ProgramBundle.script.write(
            in: "\(daemon.directory)/src-named", id: "com.example.named",
            hostExecutables: ["/bin/sh"])
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, named])
        let installed = try daemon.run("appd", ["install", named])
        #expect(installed.code == 0, "\(installed.output)")
        let instance = try daemon.launch("com.example.named", [])
        #expect(try daemon.wait(instance.id).exit?.code == 0)
        #expect(try daemon.logs(instance.id).contains(ProgramBundle.scriptOutput))
    }

    /// Issue 38 §4: what a C program expects of Linux inside the sandbox.
    @Test(
        "a C program in the sandbox: shm_open in its own /dev/shm, /tmp, getpwuid and getgrgid of its ids"
    )
    func environment() throws {
        let daemon = try TestDaemon()
        let bundle = try ProgramBundle.environment.write(
            in: "\(daemon.directory)/src-environment", id: "com.example.environment")
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
        let result = try daemon.run("appd", ["install", bundle])
        #expect(result.code == 0, "\(result.output)")
        let instance = try daemon.launch("com.example.environment", [])
        _ = try daemon.wait(instance.id)
        let output = try daemon.logs(instance.id)
        for check in ["shm_open: ok", "tmp: ok", "getpwuid: ok", "getgrgid: ok"] {
            #expect(output.contains(check), "\(output)")
        }
    }

    @Test(
        "/tmp is the data container's tmp; a tmp the app replaced with a link to a host folder shows nothing of it"
    )
    func appTmp() throws {
        let daemon = try TestDaemon()
        let bundle = try ProgramBundle.script.write(
            in: "\(daemon.directory)/src-tmp", id: "com.example.tmp",
            hostExecutables: ["/bin/sh", "/bin/rm", "/bin/ln", "/bin/sleep"])
        // Shell builtins but for rm, ln and sleep: the app writes /tmp by name, swaps its tmp
        // for a link, and reads /tmp. One instance holds on meanwhile: tmp is emptied when the
        // app's last instance exits.
        try """
        #!/bin/sh
        case $1 in
        hold) exec sleep 120 ;;
        write)
            echo from-app > /tmp/x && read -r line < "$HOME/tmp/x" && echo "wrote $line"
            [ /tmp/x -ef "$HOME/tmp/x" ] && echo "same file" ;;
        swap) rm -r "$HOME/tmp" && ln -s "$2" "$HOME/tmp" && echo swapped ;;
        read)
            for f in /tmp/* /tmp/.*; do echo "sees $f"; done
            if read -r line < /tmp/secret; then echo "read $line"; else echo "read refused"; fi ;;
        esac
        """.write(toFile: "\(bundle)/Prog", atomically: false, encoding: .utf8)
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
        let installed = try daemon.run("appd", ["install", bundle])
        #expect(installed.code == 0, "\(installed.output)")
        let data = try daemon.client.get("/v1/apps/com.example.tmp", as: APIApp.self).dataContainer
        func run(_ arguments: [String]) throws -> String {
            let instance = try daemon.launch("com.example.tmp", arguments)
            _ = try daemon.wait(instance.id)
            return try daemon.logs(instance.id)
        }
        let holder = try daemon.launch("com.example.tmp", ["hold"])

        let wrote = try run(["write"])
        #expect(wrote.contains("wrote from-app") && wrote.contains("same file"), "\(wrote)")
        #expect(
            (try? String(contentsOfFile: "\(data)/tmp/x", encoding: .utf8)) == "from-app\n")

        // A host folder anyone may read: only the sandbox keeps it from the app.
        let host = try makeTemporaryDirectory("/var/tmp/appd-host-folder.XXXXXX")
        defer { try? FileManager.default.removeItem(atPath: host) }
        chmod(host, 0o755)
        try "host-secret\n".write(toFile: "\(host)/secret", atomically: true, encoding: .utf8)
        chmod("\(host)/secret", 0o644)
        #expect(try run(["swap", host]).contains("swapped"))
        #expect(
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(data)/tmp")) == host)
        let after = try run(["read"])
        #expect(after.contains("read refused"), "\(after)")
        #expect(!after.contains("host-secret") && !after.contains("sees /tmp/secret"), "\(after)")

        // The last instance gone, tmp is emptied without following the link.
        _ = try daemon.client.post(
            "/v1/instances/\(holder.id)/terminate", body: TerminateRequest(grace: 1),
            as: APIInstance.self)
        _ = try daemon.wait(holder.id)
        #expect(
            (try? String(contentsOfFile: "\(host)/secret", encoding: .utf8)) == "host-secret\n")
    }

    /// Issue 38 §4's survey (docs/sandbox.md, "Common programs"): Python's sqlite3 writing into
    /// Documents, and http.server answering on the instance's own loopback, each a bundle script
    /// run through the host's python3, which its Info.plist names and the signer grants.
    @Test("python3 as a bundle's interpreter: sqlite3 in Documents, http.server on its loopback")
    func commonPrograms() throws {
        let daemon = try TestDaemon()
        let bundle = try ProgramBundle.script.write(
            in: "\(daemon.directory)/src-python", id: "com.example.python",
            hostExecutables: ["/usr/bin/python3"])
        try """
        #!/usr/bin/python3
        import http.server, os, sqlite3, sys, threading, urllib.request
        if sys.argv[1:] == ["sqlite"]:
            documents = os.path.join(os.environ["HOME"], "Documents")
            os.makedirs(documents, exist_ok=True)
            db = sqlite3.connect(os.path.join(documents, "notes.db"))
            db.execute("create table if not exists notes (text)")
            db.execute("insert into notes values ('from python')")
            db.commit()
            print("sqlite rows", db.execute("select count(*) from notes").fetchone()[0])
        else:
            os.chdir(os.environ["HOME"])
            server = http.server.ThreadingHTTPServer(
                ("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            url = "http://127.0.0.1:%d/" % server.server_address[1]
            with urllib.request.urlopen(url, timeout=10) as response:
                print("http status", response.status)
            server.shutdown()
        """.write(toFile: "\(bundle)/Prog", atomically: false, encoding: .utf8)
        // http.server binds a port: without network.server Landlock refuses it (EACCES).
        try """
        <?xml version="1.0" encoding="UTF-8"?><plist version="1.0"><dict>\
        <key>com.apple.security.app-sandbox</key><true/>\
        <key>com.apple.security.network.server</key><true/></dict></plist>
        """.write(toFile: "\(bundle)/Entitlements.plist", atomically: true, encoding: .utf8)
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
        let installed = try daemon.run("appd", ["install", bundle])
        #expect(installed.code == 0, "\(installed.output)")
        func run(_ arguments: [String]) throws -> (Int32?, String) {
            let instance = try daemon.launch("com.example.python", arguments)
            let code = try daemon.wait(instance.id).exit?.code
            return (code, try daemon.logs(instance.id))
        }
        for round in 1...2 {
            let (code, log) = try run(["sqlite"])
            #expect(code == 0 && log.contains("sqlite rows \(round)"), "\(log)")
        }
        let data = try daemon.client.get("/v1/apps/com.example.python", as: APIApp.self)
            .dataContainer
        let rows = try runTool(
            "/usr/bin/sqlite3", ["\(data)/Documents/notes.db", "select text from notes"])
        #expect(rows.output == "from python\nfrom python\n", "\(rows.output)")
        let (code, log) = try run(["http"])
        #expect(code == 0 && log.contains("http status 200"), "\(log)")
    }
}
