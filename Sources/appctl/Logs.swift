import AppdAPI
import AppdCLI
import AppdClient
import ArgumentParser

struct Logs: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print an instance's output (stdout and stderr) from its start.",
        discussion: """
            An app id means its most recent instance, running or ended. With -f the output \
            keeps coming as the app writes it, until the instance exits. The bytes are the \
            app's own: --json changes only how errors are printed.

            Examples:
              appctl logs com.example.notes
              appctl logs -f 3f2a9c01d4e7
            """)

    @OptionGroup var options: GlobalOptions

    @Flag(name: [.short, .long], help: "Keep printing until the instance exits.")
    var follow = false

    @Argument(
        help: ArgumentHelp(
            "A bundle id (its most recent instance), or an instance id.", valueName: "id|instance"),
        completion: .custom(ShellCompletion.targets))
    var target: Target

    func run() throws {
        try options.run {
            let client = options.client
            let id = try client.latestInstance(target)
            try client.stream(
                AppdClient.path("instances", id, "logs", query: ["follow": follow ? "1" : nil])
            ) { bytes in
                try Output.raw(bytes)
            }
        }
    }
}
