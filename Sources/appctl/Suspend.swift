import AppdAPI
import AppdBase
import AppdClient
import ArgumentParser

struct Suspend: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "suspend",
        abstract: "Freeze an instance (or each of an app's): no CPU until 'appctl resume'.",
        discussion: """
            The instance goes to the background (an app on the lifecycle channel gets \
            willResignActive and didEnterBackground), then its cgroup is frozen at once, whatever \
            background tasks or modes it holds: its processes stay in memory, keep their state and \
            get no CPU time. They do not notice, unlike SIGSTOP.

            Example:
              appctl suspend com.example.notes && appctl resume com.example.notes
            """)

    @OptionGroup var options: GlobalOptions

    @Argument(help: Target.help, completion: .custom(ShellCompletion.targets))
    var target: Target

    func run() throws {
        try InstanceAction.run(target, options: options) { client, id throws(AppdError) in
            try client.suspend(id)
        }
    }
}
