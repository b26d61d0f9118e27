import AppdAPI
import AppdBase
import AppdClient
import ArgumentParser

struct Background: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "background",
        abstract: "Send an instance (or each of an app's) to the background.",
        discussion: """
            active → inactive → background, the app told each step (willResignActive, \
            didEnterBackground). After [Lifecycle] BackgroundGracePeriod it is frozen \
            (suspended), unless it holds a background task or declares a UIBackgroundModes \
            value the daemon allows. 'appctl activate' or 'appctl resume' bring it back.

            Example:
              appctl background com.example.notes
            """)

    @OptionGroup var options: GlobalOptions

    @Argument(help: Target.help, completion: .custom(ShellCompletion.targets))
    var target: Target

    func run() throws {
        try InstanceAction.run(target, options: options) { client, id throws(AppdError) in
            try client.background(id)
        }
    }
}
