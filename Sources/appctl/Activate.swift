import AppdAPI
import AppdBase
import AppdClient
import ArgumentParser

struct Activate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "activate",
        abstract: "Make an instance (or each of an app's) the active app.",
        discussion: """
            It comes to the foreground as on iOS: a suspended one is thawed, then it goes \
            background → inactive → active, and an app on the lifecycle channel is told each \
            step (willEnterForeground, didBecomeActive). With the daemon's ActivePolicy=single \
            the app that was active goes to the background (willResignActive, \
            didEnterBackground) and is frozen after the grace period.

            Example:
              appctl activate com.example.notes
            """)

    @OptionGroup var options: GlobalOptions

    @Argument(help: Target.help, completion: .custom(ShellCompletion.targets))
    var target: Target

    func run() throws {
        try InstanceAction.run(target, options: options) { client, id throws(AppdError) in
            try client.activate(id)
        }
    }
}
