import AppdBase
import Foundation
import Supervisor
import Synchronization

/// The encoded answers of `GET /v1/instances`, kept for the version of the supervisor's
/// instances (and their denial counts) they were made from (`Supervisor.listed`): encoding 1,000 instances (their dates
/// above all) is most of the cost of the request, and idle instances do not change. A few
/// queries are kept (with and without `all`, per app), the oldest dropped first; any change to
/// any instance makes every one of them stale.
final class InstanceListCache: Sendable {
    struct Key: Hashable {
        /// One answer for every spelling of the app.
        var app: AppID?
        var all: Bool
    }

    private struct State {
        var version = ListingVersion(entries: 0, denials: 0)
        var answers: [Key: Data] = [:]
        var order: [Key] = []
    }

    static let maxAnswers = 8
    private let state = Mutex(State())

    /// The answer for `version` and the query if it was made already; else `make()`'s, kept.
    func data(version: ListingVersion, app: AppID?, all: Bool, _ make: () throws -> Data) rethrows
        -> Data
    {
        let key = Key(app: app, all: all)
        if let hit = state.withLock({ $0.version == version ? $0.answers[key] : nil }) {
            return hit
        }
        let data = try make()
        state.withLock { state in
            // An older version arriving late (a request that waited) never replaces a newer one.
            if version.isNewer(than: state.version) {
                state = State(version: version)
            }
            guard version == state.version, state.answers[key] == nil else { return }
            if state.order.count >= Self.maxAnswers {
                state.answers[state.order.removeFirst()] = nil
            }
            state.answers[key] = data
            state.order.append(key)
        }
        return data
    }
}
