import AppdAPI
import AppdCLI
import AppdClient
import ArgumentParser

struct MemoryWarning: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "memory-warning",
        abstract: "Send didReceiveMemoryWarning to every running app (or one app's instances).",
        discussion: """
            What jetsam does first under memory pressure, on demand: every instance that speaks \
            the lifecycle channel and is not frozen gets didReceiveMemoryWarning. Prints the \
            instances that got it (--json: {"delivered": [...]}).

            Examples:
              appctl memory-warning
              appctl memory-warning com.example.notes
            """)

    @OptionGroup var options: GlobalOptions

    @Argument(
        help: ArgumentHelp("Only this app's instances.", valueName: "id"),
        completion: .custom(ShellCompletion.appIDs))
    var id: String?

    func run() throws {
        try options.run {
            let answer = try options.client.memoryWarning(app: id)
            if options.json {
                Output.json(answer)
            } else if answer.delivered.isEmpty {
                print("No instance speaks the lifecycle channel.")
            } else {
                for instance in answer.delivered { print(instance) }
            }
        }
    }
}
