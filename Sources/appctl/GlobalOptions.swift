import AppdAPI
import AppdBase
import AppdCLI
import AppdClient
import ArgumentParser

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// Options every subcommand takes (before or after its name).
struct GlobalOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The daemon's socket (default: $APPD_SOCKET, else the --root daemon's, else /run/appd/appd.sock).",
            valueName: "path"))
    var socket: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Talk to the daemon serving this state root (default: $APPD_ROOT).", valueName: "dir"))
    var root: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Another machine's daemon, through ssh: ssh://[user@]host[:port][/socket] (default: $APPD_HOST).",
            valueName: "url"))
    var host: String?

    @Flag(name: .long, help: "Print machine-readable JSON on stdout (errors too).")
    var json = false

    /// The daemon to talk to: `--host` (checked in `validate`), else the local socket.
    var client: AppdClient {
        (try? AppdClient(socket: socket, root: root, host: host))
            ?? AppdClient(socket: socket, root: root)
    }

    /// A malformed `--host` or `$APPD_HOST` is refused before anything is sent, as appctl
    /// prints any error.
    func validate() throws {
        do {
            _ = try AppdClient(socket: socket, root: root, host: host)
        } catch {
            Output.fail(error, json: json)
            throw ExitCode.failure
        }
    }

    /// Runs `body`, turning an `AppdError` into a message (or a JSON error object) and exit 1.
    /// Other errors (an `ExitCode` with the app's status) pass through.
    func run(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch let error as AppdError {
            Output.fail(error, json: json)
            throw ExitCode.failure
        }
    }
}
