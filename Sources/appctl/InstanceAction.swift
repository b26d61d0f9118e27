import AppdAPI
import AppdBase
import AppdCLI
import AppdClient
import ArgumentParser

/// terminate, kill, suspend and resume: one request per instance the target names, and the
/// instances as the daemon answered (text: `INSTANCE APP STATE` lines; JSON: an array, also
/// for a single instance, so scripts read one shape).
enum InstanceAction {
    static func run(
        _ target: Target, options: GlobalOptions,
        _ action: (AppdClient, String) throws(AppdError) -> APIInstance
    ) throws {
        try options.run {
            let client = options.client
            var answered: [APIInstance] = []
            var skipped: [AppdError] = []
            for id in try client.liveInstances(target) {
                do {
                    answered.append(try action(client, id))
                } catch let error as AppdError
                    where target.isApp && (error.code == .notFound || error.code == .conflict)
                {
                    // It ended between the listing and the request, or is not in a state the
                    // action applies to (resuming a running one): the others still count.
                    skipped.append(error)
                }
            }
            if answered.isEmpty, let first = skipped.first { throw first }
            if options.json {
                Output.json(answered)
            } else {
                Table.print(answered.map { [$0.id, $0.app, $0.state.rawValue] })
            }
        }
    }
}

extension Target {
    var isApp: Bool {
        if case .app = self { true } else { false }
    }
}
