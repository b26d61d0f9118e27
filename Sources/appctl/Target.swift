import AppdAPI
import AppdBase
import AppdClient
import ArgumentParser

/// What a command acts on: one instance (12 hex digits, never a bundle id, which needs a dot)
/// or an app, meaning its instances.
enum Target: Equatable, ExpressibleByArgument {
    case instance(String)
    case app(String)

    init(_ argument: String) {
        let hex = argument.utf8.allSatisfy {
            (48...57).contains($0) || (65...70).contains($0) || (97...102).contains($0)
        }
        self = argument.utf8.count == 12 && hex ? .instance(argument) : .app(argument)
    }

    init?(argument: String) {
        guard !argument.isEmpty else { return nil }
        self.init(argument)
    }

    static let help = ArgumentHelp(
        "A bundle id (each of its running instances), or an instance id (12 hex digits).",
        valueName: "id|instance")
}

extension AppdClient {
    /// The ids of the instances `target` names: itself, or each running instance of the app,
    /// oldest first. An app without any is an error that names it (or the daemon's notFound,
    /// when it is not installed).
    func liveInstances(_ target: Target) throws(AppdError) -> [String] {
        switch target {
        case .instance(let id):
            return [id]
        case .app(let id):
            let live = try instances(app: id).filter { $0.state != .exited }
                .sorted { $0.startedAt < $1.startedAt }
            guard live.isEmpty else { return live.map(\.id) }
            throw noRunningInstance(id)
        }
    }

    func noRunningInstance(_ app: String) -> AppdError {
        // Not installed at all says more than "no running instance".
        do {
            _ = try self.app(app)
        } catch {
            return error
        }
        return AppdError(
            .notFound, "\(app) has no running instance",
            hint: "start one: appctl launch \(app)")
    }

    /// The instance `target` names, or the app's most recent running one, or when none runs
    /// its most recent one: the running server's log, not that of a tool of the same app that
    /// ended after it started.
    func latestInstance(_ target: Target) throws(AppdError) -> String {
        switch target {
        case .instance(let id):
            return id
        case .app(let id):
            let all = try instances(app: id, all: true)
            let running = all.filter { $0.state != .exited }
            if let latest = (running.isEmpty ? all : running).max(by: {
                $0.startedAt < $1.startedAt
            }) {
                return latest.id
            }
            _ = try self.app(id)
            throw AppdError(
                .notFound, "\(id) has no instance, running or ended",
                hint: "start one: appctl launch \(id)")
        }
    }
}
