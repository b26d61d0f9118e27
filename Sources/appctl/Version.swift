import AppdAPI
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

struct Version: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "version",
        abstract: "Show the daemon: its version, pid, state root, and what you may do.",
        discussion: """
            Who you are is what the kernel tells the daemon about this connection (uid, gid), \
            and your rights (read, control, admin) come from the [API] settings of its \
            appd.conf. Exits 1 when no daemon answers.
            """,
        aliases: ["status"])

    @OptionGroup var options: GlobalOptions

    struct View: Encodable {
        var client: String
        var socket: String
        var daemon: APIDaemonInfo
    }

    func run() throws {
        try options.run {
            let client = options.client
            let info = try client.version()
            if options.json {
                Output.json(
                    View(client: AppdVersion.current, socket: client.socketPath, daemon: info))
                return
            }
            let caller = info.caller
            let since = TextFormatting.iso8601(info.startedAt)
            let rows = [
                ("appctl", AppdVersion.current),
                (
                    "appd",
                    "\(info.version), pid \(info.pid), up \(Table.duration(Date().timeIntervalSince(info.startedAt))) (since \(since))"
                ),
                ("socket", client.socketPath),
                ("state root", info.stateRoot),
                (
                    "config",
                    info.configFile.map { file in
                        info.configFileExists == false
                            ? "\(file) (not there: built-in settings)" : file
                    } ?? "(not reported by this daemon)"
                ),
                (
                    "you",
                    "uid \(caller.uid), gid \(caller.gid); may \(caller.rights.isEmpty ? "nothing" : caller.rights.joined(separator: ", "))"
                ),
            ]
            for (label, value) in rows {
                print("\(label.padded(toLength: 11)) \(value)")
            }
        }
    }
}
