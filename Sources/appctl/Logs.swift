import AppdAPI
import AppdCLI
import AppdClient
import ArgumentParser

struct Logs: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logs",
        abstract: "Print an instance's output (stdout and stderr) from its start.",
        discussion: """
            An app id means its most recent running instance, or, when none runs, its most \
            recent one. With -f the output \
            keeps coming as the app writes it, until the instance exits; with -n only the last \
            N lines are printed first (as tail -n and journalctl -n); with --since only the \
            lines that came at or after a time. --timestamps puts the time appd read each line \
            (RFC 3339, UTC, microseconds) in front of it. The bytes are the app's own: --json \
            changes only how errors are printed.

            Examples:
              appctl logs com.example.notes
              appctl logs -n 20 -f 3f2a9c01d4e7
              appctl logs --since 10m --timestamps com.example.notes
              appctl logs --since 2026-11-24T10:00:00Z -n 50 -f com.example.notes
            """)

    @OptionGroup var options: GlobalOptions

    @Flag(name: [.short, .long], help: "Keep printing until the instance exits.")
    var follow = false

    @Option(
        name: [.customShort("n"), .customLong("lines")],
        help: ArgumentHelp("Print only the last N lines first.", valueName: "N"))
    var lines: Int?

    @Option(help: SinceArgument.help)
    var since: SinceArgument?

    @Flag(name: [.customShort("t"), .long], help: "Put the time each line came in front of it.")
    var timestamps = false

    func validate() throws {
        if let lines, !(0...100_000).contains(lines) {
            throw ValidationError("-n takes a number of lines from 0 to 100000, not \(lines)")
        }
    }

    @Argument(
        help: ArgumentHelp(
            "A bundle id (its newest running instance, else its newest), or an instance id.",
            valueName: "id|instance"),
        completion: .custom(ShellCompletion.targets))
    var target: Target

    func run() throws {
        try options.run {
            let client = options.client
            let id = try client.latestInstance(target)
            let wanted = AppdClient.LogOptions(
                follow: follow, tail: lines, since: since?.rfc3339, timestamps: timestamps)
            try client.logs(id, wanted) { bytes in
                try Output.raw(bytes)
            }
        }
    }
}
