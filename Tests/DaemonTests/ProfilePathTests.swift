import AppdAPI
import Foundation
import Testing

/// `appd profile ID --path P`: what the app sees of a host path, checked against what a real
/// sandboxed app gets when it tries (issue 25, point 7).
@Suite("appd profile --path", .serialized, rootOnly)
struct ProfilePathTests {
    @Test("--path says hidden, read-only or read-write and why, and the app's own attempts agree")
    func pathVerdicts() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe(
            "com.example.paths", info: TestDaemon.hostExecutables(["/usr/bin/env"]))
        try daemon.installProbe("com.example.other")
        let app = try daemon.client.get("/v1/apps/com.example.paths", as: APIApp.self)
        let other = try daemon.client.get("/v1/apps/com.example.other", as: APIApp.self)
        func verdict(_ path: String) throws -> (line: String, output: String) {
            let result = try daemon.run(
                "appd",
                ["profile", "--config", daemon.configPath, "com.example.paths", "--path", path])
            #expect(result.code == 0, "\(result.output)")
            return (
                result.output.split(separator: "\n").first.map(String.init) ?? "", result.output
            )
        }
        func attempt(_ mode: String, _ path: String) throws -> String {
            let instance = try daemon.launch("com.example.paths", [mode, path])
            _ = try daemon.wait(instance.id)
            return try daemon.logs(instance.id)
        }

        // The obvious escape: not there at all, so the app's open fails with ENOENT and no
        // denial is logged — which --path explains.
        let shadow = try verdict("/etc/shadow")
        #expect(shadow.line == "/etc/shadow: hidden", "\(shadow.output)")
        #expect(shadow.output.contains("why: "), "\(shadow.output)")
        #expect(try attempt("read", "/etc/shadow").contains("read: refused ENOENT"))

        let otherData = try verdict("\(other.dataContainer)/Documents")
        #expect(otherData.line.hasSuffix(": hidden"), "\(otherData.output)")
        #expect(try attempt("list", other.dataContainer).contains("refused"))

        let documents = "\(app.dataContainer)/Documents/note.txt"
        let own = try verdict(documents)
        #expect(own.line.hasPrefix("\(documents): read-write"), "\(own.output)")
        #expect(
            own.output.contains("mount \(app.dataContainer) read-write; Landlock rw"),
            "\(own.output)")
        #expect(try attempt("write", documents).contains("write: allowed"))

        let bundle = try #require(app.bundlePath)
        let executable = try verdict("\(bundle)/Probe")
        #expect(
            executable.line == "\(bundle)/Probe: read-only (may execute)", "\(executable.output)")
        #expect(try attempt("write", "\(bundle)/Probe").contains("write: refused"))

        // Through the app root's symlinks (/bin -> usr/bin here) and `..`: a host program its
        // Info.plist names; another one is not even readable (AppdHostExecutables).
        let env = try verdict("/usr/bin/../bin/env")
        #expect(env.line == "/usr/bin/env: read-only (may execute)", "\(env.output)")
        let python = try verdict("/usr/bin/python3")
        #expect(python.line == "/usr/bin/python3: no-access", "\(python.output)")
        #expect(try attempt("read", "/usr/bin/python3").contains("read: refused EACCES"))
        #expect(try attempt("read", "/usr/lib/os-release").contains("read: allowed"))

        let relative = try daemon.run(
            "appd", ["profile", "com.example.paths", "--path", "etc/shadow"])
        #expect(relative.code == 64, "\(relative.output)")
    }
}
