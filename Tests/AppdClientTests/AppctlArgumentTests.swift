import AppdAPI
import AppdCLI
import ArgumentParser
import Foundation
import Testing

@testable import appctl

/// Parses a command line the way `appctl` does: global options hoisted, then ArgumentParser.
func parse(_ arguments: [String]) throws -> ParsableCommand {
    try AppctlCommand.parseAsRoot(AppctlCommand.hoistingGlobalOptions(arguments))
}

@Suite("appctl arguments")
struct AppctlArgumentTests {
    @Test(
        "12 hex digits are an instance id; anything else is an app id",
        arguments: [
            ("3f2a9c01d4e7", Target.instance("3f2a9c01d4e7")),
            ("3F2A9C01D4E7", .instance("3F2A9C01D4E7")),
            ("000000000000", .instance("000000000000")),
            ("com.example.notes", .app("com.example.notes")),
            ("3f2a9c01d4e", .app("3f2a9c01d4e")),
            ("3f2a9c01d4e70", .app("3f2a9c01d4e70")),
            ("3f2a9c01d4eg", .app("3f2a9c01d4eg")),
            ("deadbeef.cafe", .app("deadbeef.cafe")),
        ])
    func targets(argument: String, expected: Target) throws {
        #expect(Target(argument) == expected)
        let command = try #require(try parse(["terminate", argument]) as? Terminate)
        #expect(command.target == expected)
    }

    @Test("arguments after -- go to the app, options among them included")
    func launchArguments() throws {
        let launch = try #require(
            try parse([
                "launch", "--console", "com.example.notes", "--", "--verbose", "--json", "-x", "--",
            ]) as? Launch)
        #expect(launch.id == "com.example.notes")
        #expect(launch.console && !launch.wait)
        #expect(launch.arguments == ["--verbose", "--json", "-x", "--"])
        #expect(!launch.options.json)
        let bare = try #require(try parse(["launch", "com.example.notes"]) as? Launch)
        #expect(bare.arguments.isEmpty)
    }

    @Test("app arguments without -- are refused, not taken for appctl's")
    func launchWithoutTerminator() {
        #expect(throws: (any Error).self) {
            try parse(["launch", "com.example.notes", "--verbose"])
        }
        #expect(throws: (any Error).self) { try parse(["launch", "com.example.notes", "extra"]) }
    }

    @Test(
        "global options mean the same before and after the subcommand",
        arguments: [
            ["--json", "--socket", "/tmp/a.sock", "--root", "/srv/appd", "ps", "--all"],
            ["ps", "--all", "--json", "--socket", "/tmp/a.sock", "--root", "/srv/appd"],
            ["--socket=/tmp/a.sock", "ps", "--root=/srv/appd", "-a", "--json"],
            ["--root", "/srv/appd", "ps", "--json", "--socket=/tmp/a.sock", "--all"],
        ])
    func globalOptions(arguments: [String]) throws {
        let ps = try #require(try parse(arguments) as? PS)
        #expect(ps.options.json && ps.all)
        #expect(ps.options.socket == "/tmp/a.sock")
        #expect(ps.options.root == "/srv/appd")
        #expect(ps.target == nil)
    }

    @Test("hoisting stops at the subcommand: what follows it is left alone")
    func hoistingStops() throws {
        let launch = try #require(
            try parse(["--json", "launch", "com.example.notes", "--", "--socket", "x"]) as? Launch)
        #expect(launch.options.json)
        #expect(launch.options.socket == nil)
        #expect(launch.arguments == ["--socket", "x"])
        #expect(
            GlobalArguments.hoist(["--json"], valued: ["--socket"], flags: ["--json"]) == ["--json"]
        )
        #expect(
            GlobalArguments.hoist(["--socket"], valued: ["--socket"], flags: ["--json"]) == [
                "--socket"
            ])
    }

    @Test("terminate takes a grace period, not a negative one")
    func grace() throws {
        let terminate = try #require(
            try parse(["terminate", "--grace", "2.5", "com.example.notes"]) as? Terminate)
        #expect(terminate.grace == 2.5)
        #expect(throws: (any Error).self) {
            try parse(["terminate", "--grace", "-1", "com.example.notes"])
        }
    }

    @Test("container: group needs its name, the others take none")
    func container() throws {
        let group = try #require(
            try parse(["container", "com.example.notes", "group", "group.com.example"])
                as? Container)
        #expect(group.kind == .group && group.group == "group.com.example")
        #expect(
            (try parse(["container", "com.example.notes", "data"]) as? Container)?.kind == .data)
        #expect(throws: (any Error).self) {
            try parse(["container", "com.example.notes", "group"])
        }
        #expect(throws: (any Error).self) {
            try parse(["container", "com.example.notes", "data", "extra"])
        }
        #expect(throws: (any Error).self) { try parse(["container", "com.example.notes", "home"]) }
    }

    @Test("status is version; logs -f follows")
    func aliases() throws {
        #expect(try parse(["status"]) is Version)
        #expect(try parse(["version", "--json"]) is Version)
        let logs = try #require(try parse(["logs", "-f", "3f2a9c01d4e7"]) as? Logs)
        #expect(logs.follow && logs.target == .instance("3f2a9c01d4e7"))
    }

    /// Without `commandName:` ArgumentParser names a command with `String(describing:)`, whose
    /// dynamic casts scan every protocol conformance of the static binary: appctl's start-up
    /// pays it on every run (main lists the subcommands' names), ~9% of a `launch --console`.
    @Test("every appctl command names itself")
    func commandNames() {
        var unnamed: [String] = []
        func visit(_ command: ParsableCommand.Type, path: String) {
            if command.configuration.commandName == nil { unnamed.append(path) }
            for sub in command.configuration.subcommands {
                visit(sub, path: path + " " + (sub.configuration.commandName ?? "\(sub)"))
            }
        }
        visit(AppctlCommand.self, path: "appctl")
        #expect(unnamed.isEmpty, "no commandName: \(unnamed)")
    }
}

@Suite("appctl output")
struct AppctlOutputTests {
    @Test("ps's EXIT column: the code, the signal's name, or how it was ended")
    func exitColumn() {
        #expect(PS.shortExit(APIExit(reason: .exited, code: 3)) == "3")
        #expect(PS.shortExit(APIExit(reason: .signaled, signal: 11)) == "SIGSEGV")
        #expect(PS.shortExit(APIExit(reason: .killedAfterGrace, signal: 9)) == "killed-after-grace")
        #expect(
            PS.shortExit(APIExit(reason: .failedToLaunch, message: "no Landlock"))
                == "failed-to-launch")
    }

    @Test("durations keep two units at most")
    func durations() {
        #expect(Table.duration(42.9) == "42s")
        #expect(Table.duration(185) == "3m05s")
        #expect(Table.duration(2 * 3600 + 7 * 60 + 59) == "2h07m")
        #expect(Table.duration(3 * 86400 + 4 * 3600) == "3d04h")
        #expect(Table.duration(-5) == "0s")
    }

    @Test("an event reads as time, kind, app, instance and what happened")
    func eventLine() {
        let time = Date(timeIntervalSince1970: 1_700_000_000)
        let exited = APIEvent(
            seq: 4, time: time, kind: .exited, app: "com.example.notes", instance: "3f2a9c01d4e7",
            exit: APIExit(reason: .exited, code: 0))
        #expect(
            Events.text(exited)
                == "2023-11-14T22:13:20Z  exited       com.example.notes  3f2a9c01d4e7  exited with code 0"
        )
        let installed = APIEvent(
            seq: 5, time: time, kind: .installed, app: "com.example.notes", version: "3")
        #expect(
            Events.text(installed)
                == "2023-11-14T22:13:20Z  installed    com.example.notes  -  version 3")
    }
}

@Suite("appctl --since")
struct SinceArgumentTests {
    @Test(
        "a time ago as journalctl and docker write it",
        arguments: [
            ("90s", 90.0), ("10m", 600), ("2h", 7200), ("1d", 86400), ("1h30m", 5400),
            ("0.5s", 0.5),
        ])
    func durations(text: String, seconds: Double) {
        #expect(SinceArgument.duration(text) == seconds)
        let now = Date()
        #expect(SinceArgument.parse(text, now: now) == now.addingTimeInterval(-seconds))
    }

    @Test(
        "RFC 3339 with or without fractions and offsets; anything else is refused",
        arguments: [
            ("2026-11-24T10:00:00Z", 1_795_514_400.0), ("2026-11-24T10:00:00.5Z", 1_795_514_400.5),
            ("2026-11-24T11:00:00+01:00", 1_795_514_400.0),
        ])
    func times(text: String, epoch: Double) {
        #expect(SinceArgument.parse(text, now: Date())?.timeIntervalSince1970 == epoch)
    }

    @Test(
        "nonsense is refused by appctl before it asks the daemon",
        arguments: ["", "10", "m", "10x", "yesterday", "1e9999s", "-5m"])
    func refused(text: String) {
        #expect(SinceArgument(argument: text) == nil, "\(text)")
        #expect(throws: (any Error).self) {
            try parse(["logs", "--since", text, "com.example.notes"])
        }
    }

    @Test("events --since takes a seq or a time")
    func events() throws {
        let seq = try #require(try parse(["events", "--since", "1200"]) as? Events)
        #expect(seq.sinceQuery == "1200")
        let time = try #require(try parse(["events", "--since", "10m"]) as? Events)
        #expect(time.sinceQuery?.hasSuffix("Z") == true)
        #expect(throws: (any Error).self) { try parse(["events", "--since", "soon"]) }
    }
}
