import AppdAPI
import AppdBase
import AppdClient
import ArgumentParser

struct Kill: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kill",
        abstract:
            "Kill an instance (or each of an app's) at once: its whole cgroup, no grace period.",
        discussion: """
            For an app that does not stop on 'appctl terminate'. Nothing in the sandbox gets a \
            chance to clean up.

            Example:
              appctl kill com.example.notes
            """)

    @OptionGroup var options: GlobalOptions

    @Argument(help: Target.help, completion: .custom(ShellCompletion.targets))
    var target: Target

    func run() throws {
        try InstanceAction.run(target, options: options) { client, id throws(AppdError) in
            try client.kill(id)
        }
    }
}
