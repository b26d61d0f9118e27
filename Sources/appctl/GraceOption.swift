import AppdAPI
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
    /// `POST /v1/instances/{iid}/ACTION` with this grace period, for each instance `target`
    /// names (terminate, restart).
    func post(_ action: String, _ target: Target, options: GlobalOptions) throws {
        try InstanceAction.run(target, options: options) { client, id throws(APIError) in
            try client.post(
                AppdClient.path("instances", id, action), body: TerminateRequest(grace: grace),
                as: APIInstance.self)
        }
    }
}
