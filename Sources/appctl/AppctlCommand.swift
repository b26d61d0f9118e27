import AppdAPI
import AppdCLI
import ArgumentParser

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

@main
struct AppctlCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "appctl",
        abstract: "Run and watch sandboxed apps through the appd daemon.",
        discussion: """
            appctl talks to the appd daemon on its socket: --socket, else APPD_SOCKET, else the \
            daemon of --root/APPD_ROOT (the socket it recorded in <dir>/run/appd.socket-path, \
            else <dir>/run/appd.sock), else /run/appd/appd.sock; or another \
            machine's through ssh with --host ssh://[user@]host[:port][/socket] (or APPD_HOST), \
            as that machine's user. What you may do is what the daemon's [API] settings give your uid: see 'appctl status'. Apps \
            are installed with 'appd install'.

            An app is named by its bundle id (case does not matter); an instance, one run of an \
            app, by the 12 hex digits 'appctl launch' and 'appctl ps' print. Commands that act \
            on instances take either: an app id means each of its running instances.

            Examples:
              appctl launch com.example.notes
              appctl activate com.example.mail
              appctl launch --console com.example.notes -- --verbose
              appctl ps
              appctl terminate com.example.notes
              appctl logs -f com.example.notes
              appctl container com.example.notes data
              appctl events --json

            Exit status: 0, or 1 on an error (with --json the error is printed on stdout as \
            {"error": {...}}), or 64 on a usage error; 'launch --wait' and 'launch --console' \
            exit with the app's code (128+N if signal N ended it, 127 if its sandbox could not \
            be built).
            """,
        version: AppdVersion.current,
        subcommands: [
            Launch.self, Open.self, Activate.self, Background.self, Terminate.self, Restart.self,
            Kill.self,
            Suspend.self,
            Resume.self, MemoryWarning.self, PS.self, List.self,
            Info.self,
            Container.self, Files.self, Logs.self, Events.self, Top.self, Denials.self,
            Version.self,
            System.self,
        ]
    )

    /// Accepts the global options on either side of the subcommand, as `appd` does:
    /// `appctl --json ps` and `appctl ps --json` mean the same.
    ///
    /// Every subcommand names itself (`commandName:`): otherwise ArgumentParser derives the name
    /// with `String(describing: Type.self)`, whose dynamic casts scan every protocol conformance
    /// of this static binary (Foundation's included) — about 1 ms of each appctl run.
    static func main() {
        Output.program = "appctl"
        let arguments = hoistingGlobalOptions(Array(CommandLine.arguments.dropFirst()))
        GlobalArguments.refuseMisspelledSubcommand(
            arguments, program: "appctl",
            subcommands: configuration.subcommands.flatMap {
                [$0._commandName] + $0.configuration.aliases
            },
            elsewhere: otherToolsWords)
        main(arguments)
    }

    /// Words for which appctl has no command but the person typing meant one: appd's commands,
    /// and the names other tools (docker, systemctl, journalctl) use for ours.
    static let otherToolsWords: [String: String] = {
        var words: [String: String] = [
            "log": "appctl logs", "stop": "appctl terminate", "start": "appctl launch",
            "run": "appctl launch (appd run, as root, waits for it in the foreground)",
            "rm": "appd uninstall", "remove": "appd uninstall",
        ]
        for command in [
            "install", "uninstall", "verify", "sign", "keygen", "profile", "doctor", "override",
            "serve", "reload",
        ] {
            words[command] = "appd \(command)"
        }
        return words
    }()

    static func hoistingGlobalOptions(_ arguments: [String]) -> [String] {
        let hoist = {
            GlobalArguments.hoist($0, valued: ["--socket", "--root", "--host"], flags: ["--json"])
        }
        let once = hoist(arguments)
        // A command with subcommands of its own takes them after the options too:
        // `appctl --json files get ...` is `appctl files get --json ...`.
        guard let first = once.first, ["files", "system"].contains(first) else { return once }
        return [first] + hoist(Array(once.dropFirst()))
    }
}
