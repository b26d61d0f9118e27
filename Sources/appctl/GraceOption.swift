import AppdAPI
import AppdBase
import AppdClient
import ArgumentParser

/// `--grace SECONDS` of terminate and restart: between SIGTERM and killing the cgroup, within
/// the 0-3600 s the daemon accepts.
struct GraceOption: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Seconds between SIGTERM and SIGKILL (default: the daemon's).", valueName: "seconds"))
    var grace: Double?

    func validate() throws {
        if let grace, !(grace >= 0 && grace <= 3600) {
            throw ValidationError("--grace must be a number of seconds from 0 to 3600")
        }
    }
}

extension GraceOption {
    /// `action` (`AppdClient.terminate` or `.restart`) with this grace period, for each instance
    /// `target` names.
    func run(
        _ target: Target, options: GlobalOptions,
        _ action: (AppdClient, String, Double?) throws(AppdError) -> APIInstance
    ) throws {
        try InstanceAction.run(target, options: options) { client, id throws(AppdError) in
            try action(client, id, grace)
        }
    }
}
