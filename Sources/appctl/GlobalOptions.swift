import AppdAPI
import AppdCLI
import AppdClient
import ArgumentParser
import Foundation

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

    @Flag(name: .long, help: "Print machine-readable JSON on stdout (errors too).")
    var json = false

    var client: AppdClient { AppdClient(socket: socket, root: root) }

    /// Runs `body`, turning an `APIError` into a message (or a JSON error object) and exit 1.
    /// Other errors (an `ExitCode` with the app's status) pass through.
    func run(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch let error as APIError {
            Output.fail(error, json: json)
            throw ExitCode.failure
        }
    }
}

/// Bundle ids (and instance ids) for shell completion, from the daemon the command line
/// names; nothing when it does not answer within a second.
enum Completion {
    static func appIDs(_ words: [String], _: Int, _ prefix: String) -> [String] {
        let apps = (try? client(words).get(AppdClient.path("apps"), as: [APIApp].self)) ?? []
        return apps.map(\.bundleId).filter { $0.hasPrefix(prefix) }
    }

    static func targets(_ words: [String], _ index: Int, _ prefix: String) -> [String] {
        let instances =
            (try? client(words).get(AppdClient.path("instances"), as: [APIInstance].self)) ?? []
        return appIDs(words, index, prefix) + instances.map(\.id).filter { $0.hasPrefix(prefix) }
    }

    private static func client(_ words: [String]) -> AppdClient {
        func value(_ name: String) -> String? {
            for (index, word) in words.enumerated() {
                if word == name, index + 1 < words.count { return words[index + 1] }
                if word.hasPrefix(name + "=") { return String(word.dropFirst(name.count + 1)) }
            }
            return nil
        }
        var client = AppdClient(socket: value("--socket"), root: value("--root"))
        client.timeout = 1
        return client
    }
}
