import AppBundle
import AppContainers
import AppdAPI
import AppdBase
import AppdCLI
import AppdClient
import AppdConfig
import ArgumentParser
import Foundation

/// Options every subcommand takes.
struct GlobalOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "State root directory (default: $APPD_ROOT or /var/lib/appd); through the daemon, the one serving it.",
            valueName: "dir"))
    var root: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Configuration file (default: $APPD_CONFIG or /etc/appd/appd.conf).", valueName: "file")
    )
    var config: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The daemon's socket (default: $APPD_SOCKET, else the --root daemon's, else /run/appd/appd.sock).",
            valueName: "path"))
    var socket: String?

    @Flag(name: .long, help: "Print machine-readable JSON on stdout (errors too).")
    var json = false

    var environment: [String: String] { ProcessInfo.processInfo.environment }

    var stateRoot: StateRoot {
        StateRoot(
            path: root ?? environment["APPD_ROOT"].flatMap { $0.isEmpty ? nil : $0 }
                ?? AppdConfiguration.defaultRoot)
    }

    /// The daemon serving `--root` (or the one `--socket`/`$APPD_SOCKET` names).
    var client: AppdClient { AppdClient(socket: socket, root: root, environment: environment) }

    /// The client of a command that goes through the daemon. The daemon reads its own
    /// configuration, so a `--config` given here would be ignored without a word: refused.
    func daemonClient() throws -> AppdClient {
        if let config {
            throw AppdError(
                .invalidConfig,
                "--config \(config) is not read through the daemon: appd serve uses its own configuration",
                hint:
                    "add --no-daemon to run this in-process (as root) with that file, or edit the daemon's file and run 'systemctl reload appd'"
            )
        }
        return client
    }

    func loadConfiguration() throws -> AppdConfiguration {
        let source = configurationSource
        return try AppdConfiguration.load(path: source.path, explicit: source.explicit)
    }

    /// Where appd.conf is: --config, else APPD_CONFIG (both must exist), else the default.
    var configurationSource: (path: String, explicit: Bool) {
        if let path = config ?? environment["APPD_CONFIG"].flatMap({ $0.isEmpty ? nil : $0 }) {
            return (path, true)
        }
        return (AppdConfiguration.defaultPath, false)
    }

    func openStore(_ access: AppStore.Access) throws -> AppStore {
        // Every mode under the state root is set explicitly; anything else appd creates there
        // (SQLite's -wal and -shm files) must not be readable by others.
        umask(0o077)
        if access == .readWrite && geteuid() != 0 {
            throw AppdError(
                .permissionDenied, "changing the state root \(stateRoot.path) needs root",
                hint: "run it with sudo")
        }
        return try AppStore(root: stateRoot, config: loadConfiguration(), access: access)
    }

    /// Runs `body`, turning an `AppdError` (its own or the daemon's) into a message (or a JSON
    /// error object) and exit 1.
    func run(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch var error as AppdError {
            if error.code == .unavailable, error.errno == ENOENT || error.errno == ECONNREFUSED {
                error.hint =
                    (error.hint.map { $0 + "; " } ?? "")
                    + "or, as root, run this command in-process with --no-daemon"
            }
            Output.fail(error, json: json)
            throw ExitCode.failure
        }
    }

    /// Told once when another appd process holds the lock.
    var waitNotice: @Sendable () -> Void {
        {
            FileHandle.standardError.write(
                Data("appd: waiting for another appd command to finish...\n".utf8))
        }
    }
}

/// `--no-daemon` of the commands that go through the daemon.
struct LocalMode: ParsableArguments {
    @Flag(
        name: .customLong("no-daemon"),
        help: """
            Work on the state root in-process, as root, bypassing the daemon and its checks \
            (for recovery when it is down, and scripts).
            """)
    var noDaemon = false
}
