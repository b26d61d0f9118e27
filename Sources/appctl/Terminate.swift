import AppdAPI
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

    @Option(
        help: ArgumentHelp(
            "Seconds between SIGTERM and SIGKILL (default: the daemon's).", valueName: "seconds"))
    var grace: Double?

    @Argument(help: Target.help, completion: .custom(ShellCompletion.targets))
    var target: Target

    func validate() throws {
        if let grace, !(grace >= 0 && grace.isFinite) {
            throw ValidationError("--grace must be a number of seconds, 0 or more")
        }
    }

    func run() throws {
        try InstanceAction.run(target, options: options) { client, id throws(APIError) in
            try client.post(
                AppdClient.path("instances", id, "terminate"), body: TerminateRequest(grace: grace),
                as: APIInstance.self)
        }
    }
}
