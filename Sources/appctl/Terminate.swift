import AppdAPI
import AppdBase
import AppdClient
import ArgumentParser

struct Terminate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "terminate",
        abstract: "Stop an instance (or each of an app's): SIGTERM, a grace period, then SIGKILL.",
        discussion: """
            The app gets SIGTERM; if it is still running when the grace period ends, its whole \
            cgroup is killed. The default grace period is TerminateGracePeriod= of appd.conf. \
            Prints each instance, now 'terminating'; 'appctl ps --all' shows how it \
            ended.

            Examples:
              appctl terminate com.example.notes
              appctl terminate 3f2a9c01d4e7 --grace 10
            """)

    @OptionGroup var options: GlobalOptions

    @OptionGroup var graceOption: GraceOption
    var grace: Double? { graceOption.grace }

    @Argument(help: Target.help, completion: .custom(ShellCompletion.targets))
    var target: Target

    func run() throws {
        try graceOption.run(target, options: options) { client, id, grace throws(AppdError) in
            try client.terminate(id, grace: grace)
        }
    }
}
