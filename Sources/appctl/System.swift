import AppdAPI
import AppdCLI
import AppdClient
import ArgumentParser

/// `appctl system ...`: plumbing for other programs.
struct System: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "system",
        abstract: "Plumbing: what 'appctl --host' runs on the remote machine.",
        subcommands: [DialStdio.self])

    struct DialStdio: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "dial-stdio",
            abstract:
                "Relay stdin and stdout to the daemon's socket (as 'docker system dial-stdio').",
            discussion: """
                'appctl --host ssh://host' runs 'appctl system dial-stdio' on that host through \
                ssh: the bytes of one HTTP exchange go through unchanged, and the daemon sees \
                this process's uid, so the remote user's rights apply. Exits when the daemon \
                closes the connection; 1 (with the reason on stderr) when it cannot connect.
                """)

        @OptionGroup var options: GlobalOptions

        func run() throws {
            // The relay speaks raw bytes on stdout: --json changes nothing, errors go to stderr.
            do {
                try AppdClient(socket: options.socket, root: options.root).dialStdio()
            } catch {
                Output.fail(error, json: false)
                throw ExitCode.failure
            }
        }
    }
}
