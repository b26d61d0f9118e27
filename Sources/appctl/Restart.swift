import AppdAPI
import AppdBase
import AppdClient
import ArgumentParser

struct Restart: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restart",
        abstract:
            "Terminate an instance (or each of an app's) and launch it again with the same arguments.",
        discussion: """
            Each instance is terminated as by 'appctl terminate' (SIGTERM, the grace period, \
            then SIGKILL); once it has ended, its app is launched again with the arguments it \
            had, into the background if it was there (a service always is). A KeepAlive \
            service is not restarted twice: appd's own restarts only follow an end appd did \
            not ask for. Prints each new instance. After an upgrade, 'appctl ps' marks the \
            instances still on the old version; 'appd install --restart' restarts those.

            Examples:
              appctl restart com.example.server
              appctl restart 3f2a9c01d4e7 --grace 10
            """)

    @OptionGroup var options: GlobalOptions

    @Argument(help: Target.help, completion: .custom(ShellCompletion.targets))
    var target: Target

    @OptionGroup var graceOption: GraceOption

    func run() throws {
        try graceOption.run(target, options: options) { client, id, grace throws(AppdError) in
            try client.restart(id, grace: grace)
        }
    }
}
