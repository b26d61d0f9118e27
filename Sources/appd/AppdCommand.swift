import AppContainers
import AppdAPI
import AppdCLI
import ArgumentParser
import Foundation

@main
struct AppdCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "appd",
        abstract: "Install and manage sandboxed app bundles (Name.app) on Linux.",
        discussion: """
            appd installs iOS/macOS-style app bundles into containers at random UUID paths: a \
            read-only bundle container and a data container owned by the app's own uid.

            install, uninstall, list and info go through the appd daemon (its socket: --socket, \
            APPD_SOCKET, the --root/APPD_ROOT daemon's, else /run/appd/appd.sock); with \
            --no-daemon, root runs them in-process on the state root instead. verify, profile, \
            run and doctor always work in-process; override edits appd.conf and has the \
            running daemon reload it. See appd(8), appd.conf(5). Running apps: see appctl.

            The state root is /var/lib/appd unless --root or APPD_ROOT says otherwise; settings \
            come from /etc/appd/appd.conf (or --config / APPD_CONFIG) when it exists.

            Exit status: 0; 1 on an error (doctor: something needs attention); 64 on a usage \
            error; run exits with the app's code.
            """,
        version: AppdVersion.current,
        subcommands: [
            Verify.self, Keygen.self, Sign.self, Image.self, Install.self, Uninstall.self,
            Backup.self, Restore.self,
            List.self, Info.self,
            Profile.self, Run.self, Serve.self,
            Doctor.self, Reload.self, ReclaimCaches.self, Override.self, Defaults.self,
        ]
    )

    /// Accepts the global options on either side of the subcommand, as git does:
    /// `appd --root /tmp/r list` and `appd list --root /tmp/r` mean the same.
    static func main() {
        Output.program = "appd"
        let arguments = hoistingGlobalOptions(Array(CommandLine.arguments.dropFirst()))
        GlobalArguments.refuseMisspelledSubcommand(
            arguments, program: "appd",
            subcommands: configuration.subcommands.flatMap {
                [$0._commandName] + $0.configuration.aliases
            },
            elsewhere: otherToolsWords)
        main(arguments)
    }

    /// Words for which appd has no command but the person typing meant one: appctl's commands
    /// (running apps is appctl's), and the names other tools use for ours.
    static let otherToolsWords: [String: String] = {
        var words: [String: String] = [
            "remove": "appd uninstall", "rm": "appd uninstall", "add": "appd install",
        ]
        for command in [
            "launch", "activate", "background", "terminate", "kill", "suspend", "resume", "ps",
            "logs", "events", "top", "denials", "container",
        ] {
            words[command] = "appctl \(command)"
        }
        words["log"] = "appctl logs"
        words["stop"] = "appctl terminate"
        words["start"] = "appctl launch"
        return words
    }()

    static func hoistingGlobalOptions(_ arguments: [String]) -> [String] {
        GlobalArguments.hoist(
            arguments, valued: ["--root", "--config", "--socket"], flags: ["--json"])
    }
}
