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

    /// Issue 38 §4: what a C program expects of Linux inside the sandbox. (/tmp is not there
    /// yet: the program's `tmp:` line says ENOENT; $TMPDIR is the app's tmp.)
    @Test(
        "a C program in the sandbox: shm_open in its own /dev/shm, getpwuid and getgrgid of its ids"
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
        for check in ["shm_open: ok", "getpwuid: ok", "getgrgid: ok"] {
            #expect(output.contains(check), "\(output)")
        }
    }
}
