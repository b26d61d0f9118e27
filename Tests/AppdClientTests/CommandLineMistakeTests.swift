import AppdAPI
import AppdBase
import AppdCLI
import Foundation
import TestSupport
import Testing

@testable import appd

/// What the command-line tools say when the person typing made a mistake, or did something
/// easy to misread (issue 16, "small inconsistencies").
@Suite("command-line mistakes get a clear answer")
struct CommandLineMistakeTests {
    /// No daemon is reached by any of these: a socket that is surely not there.
    func run(_ tool: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let result = try runTool(
            tool, arguments,
            environment: ["APPD_SOCKET": "/nonexistent/appd.sock", "PATH": "/usr/bin:/bin"])
        return (result.code, result.output)
    }

    /// `tool typed com.example.x` is a usage error (64) whose message says `expected`.
    func expectUsageError(_ tool: String, _ typed: String, saying expected: String) throws {
        let result = try run(tool, [typed, "com.example.x"])
        #expect(result.status == 64)
        #expect(result.output.contains(expected), "\(result.output)")
        #expect(!result.output.contains("unexpected argument"), "\(result.output)")
    }

    @Test(
        "a misspelled subcommand is answered with the one meant",
        arguments: [
            ("appctl", "lauch", "launch"), ("appctl", "lanuch", "launch"),
            ("appctl", "termiante", "terminate"),
            ("appctl", "evnets", "events"), ("appd", "instal", "install"),
            ("appd", "unistall", "uninstall"),
        ])
    func misspelled(tool: String, typed: String, meant: String) throws {
        try expectUsageError(
            tool, typed, saying: "unknown command '\(typed)'. Did you mean '\(meant)'?")
    }

    @Test(
        "the other tool's command, or another tool's word for ours, is answered with the right one",
        arguments: [
            ("appctl", "install", "appd install"), ("appctl", "uninstall", "appd uninstall"),
            ("appd", "launch", "appctl launch"), ("appd", "ps", "appctl ps"),
            ("appctl", "log", "appctl logs"), ("appctl", "stop", "appctl terminate"),
            ("appd", "stop", "appctl terminate"),
        ])
    func otherToolsCommand(tool: String, typed: String, meant: String) throws {
        try expectUsageError(
            tool, typed, saying: "\(tool) has no command '\(typed)': \(typed) is '\(meant)'")
    }

    @Test("a word far from every subcommand, or an alias, is left to the parser")
    func notMisspelled() throws {
        let names = ["launch", "ps", "list", "logs", "version", "status"]
        #expect(GlobalArguments.suggestion(for: "zzz", among: names) == nil)
        #expect(
            GlobalArguments.suggestion(for: "ls", among: names) == nil,
            "ps or list? too short to guess")
        #expect(GlobalArguments.suggestion(for: "lgos", among: names) == "logs")
        #expect(
            GlobalArguments.suggestion(for: "lixx", among: names) == nil,
            "two edits from list: too far for 4 letters")
        #expect(
            GlobalArguments.suggestion(for: String(repeating: "a", count: 5000), among: names)
                == nil)
        // `status` is `version`'s alias: it must reach ArgumentParser, which knows it.
        let status = try run("appctl", ["status"])
        #expect(!status.output.contains("unknown command"), "\(status.output)")
    }

    @Test("--config given to a command that goes through the daemon is refused, not ignored")
    func configThroughDaemon() throws {
        for arguments in [["install", "Hello.app"], ["uninstall", "com.example.x"], ["list"]] {
            let result = try run("appd", ["--config", "/nonexistent/appd.conf"] + arguments)
            #expect(result.status == 1)
            #expect(
                result.output.contains(
                    "--config /nonexistent/appd.conf is not read through the daemon"),
                "\(result.output)")
            #expect(result.output.contains("--no-daemon"))
        }
        let local = try run("appd", ["--config", "/nonexistent/appd.conf", "list", "--no-daemon"])
        #expect(local.status == 1)
        #expect(
            local.output.contains("config file /nonexistent/appd.conf does not exist"),
            "\(local.output)")
    }

    func result(previous: String?, version: String, short: String? = nil, reusedData: Bool = false)
        -> APIInstallResult
    {
        APIInstallResult(
            app: APIApp(
                bundleId: "com.example.x", state: "installed", version: version,
                shortVersion: short, uid: 1, gid: 1,
                dataContainer: "/x", installedAt: Date(), updatedAt: Date()),
            previousVersion: previous, reusedData: reusedData, warnings: [])
    }

    @Test(
        "an install says what happened to the version: installed, upgraded, downgraded or the same")
    func installSummary() {
        #expect(
            Install.summary(of: result(previous: nil, version: "3")) == "Installed com.example.x 3")
        #expect(
            Install.summary(of: result(previous: nil, version: "3", reusedData: true))
                == "Reinstalled (kept data) com.example.x 3")
        #expect(
            Install.summary(of: result(previous: "1", version: "2", short: "1.1"))
                == "Upgraded com.example.x from 1 to 1.1 (2)")
        #expect(
            Install.summary(of: result(previous: "2", version: "1", short: "1.0"))
                == "Downgraded com.example.x from 2 to 1.0 (1)")
        #expect(
            Install.summary(of: result(previous: "1", version: "1.0"))
                == "Reinstalled com.example.x 1.0 (the same version)")
        #expect(
            Install.summary(of: result(previous: "1.10", version: "1.9"))
                == "Downgraded com.example.x from 1.10 to 1.9")
    }
}

@Suite("an install refused by the daemon names the user's path")
struct InstallErrorPathTests {
    /// As the daemon sends it: the bundle and the archive are subjects without a path for them.
    let refused = AppdError(
        .invalidBundle, "not a valid app bundle (1 problem)", subject: .init(.bundle),
        problems: [BundleProblem("Info.plist", "CFBundleExecutable 'Broken' does not exist")],
        cause: AppdError(.invalidBundle, "entry 'x' is a hard link", subject: .init(.archive)))

    @Test("the bundle subject is shown as the path typed, the message and problems as sent")
    func viewing() {
        let shown = Install.viewing(
            refused, bundle: "Broken.app", as: "../build/Broken.app/", folder: true)
        #expect(shown.message == refused.message)
        #expect(shown.problems == refused.problems)
        #expect(shown.headline == "../build/Broken.app: not a valid app bundle (1 problem)")
        #expect(shown.cause?.headline == "bundle archive: entry 'x' is a hard link")
        // `.`: the folder's full path, not a bare dot.
        let dot = Install.viewing(refused, bundle: "Broken.app", as: ".", folder: true)
        #expect(dot.subject?.view == FileManager.default.currentDirectoryPath)
        // An archive: the file and the folder in it, as the person gave them.
        let ipa = Install.viewing(
            refused, bundle: "Broken.app", as: "Broken.ipa:Payload/Broken.app", folder: false)
        #expect(ipa.headline.hasPrefix("Broken.ipa:Payload/Broken.app: not a valid"))
    }
}
