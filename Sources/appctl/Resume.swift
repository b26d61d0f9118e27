import AppdAPI
import AppdBase
import AppdClient
import ArgumentParser

struct Resume: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Thaw a suspended instance (or each of an app's) and make it the active app.",
        discussion: """
            A suspended instance comes back through background and inactive to active, as \
            'appctl activate' does; one that is not suspended is left as it is.

            Example:
              appctl resume 3f2a9c01d4e7
            """)

    @OptionGroup var options: GlobalOptions

    @Argument(help: Target.help, completion: .custom(ShellCompletion.targets))
    var target: Target

    func run() throws {
        try InstanceAction.run(target, options: options) { client, id throws(AppdError) in
            try client.resume(id)
        }
    }
}
