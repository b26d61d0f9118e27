import AppdAPI
import AppdBase
import Foundation
import TestSupport
import Testing

/// The built `appd` next to this test binary, run against a canned daemon: what it sends for
/// install/uninstall/list, and that it prints the daemon's answers as it prints its own.
@Suite("appd through the daemon")
struct AppdThroughDaemonTests {
    var appdExecutable: String { builtExecutable("appd") }

    func run(_ arguments: [String], directory: String? = nil) throws -> (
        status: Int32, stdout: String, stderr: String
    ) {
        let result = try ChildProcess(
            appdExecutable, arguments, directory: directory, stderr: .capture
        ).finish()
        return (result.code, result.stdout, result.stderr)
    }

    /// Lists a tar stream with the system's tar: the archive must be one any tar reads.
    func tarListing(_ archive: Data) throws -> [String] {
        let scratch = Scratch("appd-tar")
        let file = scratch.sub("body.tar")
        try archive.write(to: URL(fileURLWithPath: file))
        let listing = try ChildProcess("/usr/bin/tar", ["-tf", file], stderr: .inherit).finish()
        #expect(listing.code == 0)
        return listing.stdout.split(separator: "\n").map(String.init).sorted()
    }

    @Test(
        "install streams the bundle folder's contents as tar, named by the folder, and prints the answer"
    )
    func install() throws {
        let scratch = Scratch("appd-install")
        let bundle = scratch.sub("Hello.app")
        try FileManager.default.createDirectory(
            atPath: bundle + "/Base.lproj", withIntermediateDirectories: true)
        for file in ["Info.plist", "Hello", "Base.lproj/Main.strings"] {
            try Data("content of \(file)\n".utf8).write(
                to: URL(fileURLWithPath: "\(bundle)/\(file)"))
        }
        var app = sampleApp
        app.entitlements = APIEntitlements(
            requested: [
                APIEntitlement(
                    key: "com.apple.security.app-sandbox", value: .bool(true), status: "linux",
                    effect: "sandboxed")
            ],
            unknown: [])
        let answer = APIInstallResult(
            app: app, previousVersion: "2", reusedData: true,
            warnings: [BundleProblem(path: "Info.plist", message: "odd")])
        let server = try CannedServer { connection in
            connection.readBody()
            connection.respond("201 Created", json(answer))
        }
        // The bundle named as `.` from inside it: the name is still the folder's.
        let result = try run(
            ["install", "--socket", server.socketPath, "--allow-downgrade", "."], directory: bundle)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            result.stdout.hasPrefix(
                "Upgraded com.example.hello from 2 to 1.0 (3)\ncom.example.hello  Hello  1.0 (3)\n  state       installed\n"
            ))
        #expect(
            result.stdout.contains(
                "  entitlements requested:\n    com.apple.security.app-sandbox = true\n        sandboxed\n"
            ))
        #expect(result.stdout.hasSuffix("  warning: Info.plist: odd\n"))
        let request = try #require(server.finish().first)
        #expect(request.line == "POST /v1/apps?name=Hello.app&allowDowngrade=1 HTTP/1.1")
        #expect(request.header("Content-Type") == "application/x-tar")
        #expect(request.header("Transfer-Encoding") == "chunked")
        #expect(request.complete)
        #expect(
            try tarListing(request.body).filter { !$0.hasSuffix("/") } == [
                "Base.lproj/Main.strings", "Hello", "Info.plist",
            ])
    }

    @Test("a bundle that cannot be read fails in the client, with its own error")
    func unreadableBundle() throws {
        let server = try CannedServer { connection in
            connection.readBody()
            connection.respond("201 Created", "{}")
        }
        let result = try run(["install", "--socket", server.socketPath, "/nonexistent/Hello.app"])
        #expect(result.status == 1)
        #expect(result.stderr == "appd: /nonexistent/Hello.app: no such bundle folder or archive\n")
        // Whatever reached the daemon is a body without its end, which it drops.
        #expect(server.finish().allSatisfy { !$0.complete })
    }

    @Test("uninstall --json prints what it always printed, from the daemon's answer")
    func uninstall() throws {
        let server = try CannedServer { connection in
            connection.respond("200 OK", json(APIUninstallResult(app: sampleApp, keptData: true)))
        }
        let result = try run([
            "--json", "--socket", server.socketPath, "uninstall", "--keep-data",
            "com.example.hello",
        ])
        #expect(result.status == 0)
        struct Printed: Decodable, Equatable {
            var bundleId: String
            var keptData: Bool
            var dataContainer: String?
        }
        let printed = try JSONDecoder().decode(Printed.self, from: Data(result.stdout.utf8))
        #expect(
            printed
                == Printed(
                    bundleId: "com.example.hello", keptData: true,
                    dataContainer: sampleApp.dataContainer))
        #expect(
            server.finish().first?.line == "DELETE /v1/apps/com.example.hello?keepData=1 HTTP/1.1")
    }

    @Test("list prints the table of appd list; no daemon is an error that points at --no-daemon")
    func list() throws {
        let server = try CannedServer { connection in
            connection.respond("200 OK", json([sampleApp]))
        }
        let listed = try run(["list", "--socket", server.socketPath])
        #expect(
            listed.stdout
                == "BUNDLE ID          NAME   VERSION  STATE      UID\ncom.example.hello  Hello  1.0 (3)  installed  20001\n"
        )
        server.stop()
        let scratch = Scratch("appd-nodaemon")
        let failed = try run(["list", "--root", scratch.path])
        #expect(failed.status == 1)
        #expect(
            failed.stderr == """
                appd: appd is not running (no daemon listening on \(scratch.path)/run/appd.sock)
                hint: the path is the default of \(scratch.path) (from --root): no daemon of it recorded another in \(scratch.path)/run/appd.socket-path; start it: appd serve --root \(scratch.path), or name the daemon's socket with --socket or APPD_SOCKET; or, as root, run this command in-process with --no-daemon

                """)
    }
}
