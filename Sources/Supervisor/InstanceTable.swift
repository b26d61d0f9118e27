import AppdAPI
import AppdBase
import Foundation

/// Every instance the Supervisor knows (running, and the last exited ones it keeps), by
/// lowercased id, and the launches admitted but not yet recorded: what requests look up, what
/// GET /v1/instances lists (sorted once per change, not once per request), and what admission
/// and an uninstall count. A value on the actor: nothing here suspends or touches the system.
struct InstanceTable {
    /// Every change to an instance (a field of its record included) passes through here:
    /// `version` tells GET /v1/instances' cache that its answer is stale.
    var entries: [String: Instance] = [:] {
        didSet {
            version &+= 1
            listing = nil
        }
    }
    private(set) var version: UInt64 = 0
    /// Every instance sorted by start, and the live ones, kept until `entries` changes.
    private var listing: (all: [APIInstance], live: [APIInstance])?
    /// Launches under way (admitted, not yet recorded) by app: an uninstall refuses while
    /// there are any, as it refuses while instances run.
    private var launching: [AppID: Int] = [:]
    /// The same launches by the uid that asked (`[Supervisor] MaxInstancesPerUser`).
    private var launchingBy: [UInt32: Int] = [:]

    /// The instances sorted by start (the live ones, or all), of `app` or of every app; their
    /// denial counts are not filled in.
    mutating func listed(app: AppID? = nil, includeExited: Bool = false) -> [APIInstance] {
        let current: (all: [APIInstance], live: [APIInstance])
        if let listing {
            current = listing
        } else {
            let all = entries.values.map(\.api).sorted {
                ($0.startedAt, $0.id) < ($1.startedAt, $1.id)
            }
            current = (all, all.filter { $0.state != .exited })
            listing = current
        }
        let chosen = includeExited ? current.all : current.live
        guard let app else { return chosen }
        return chosen.filter { app.matches($0.app) }
    }

    func entry(_ id: String) throws -> Instance {
        guard let entry = entries[id.lowercased()] else {
            throw AppdError(
                .notFound, "no instance '\(id)'",
                hint: "'appctl ps --all' lists the instances appd knows")
        }
        return entry
    }

    /// The entry of an instance that has not exited.
    func live(_ id: String, _ action: String) throws -> Instance {
        let entry = try entry(id)
        guard entry.state != .exited else {
            throw AppdError(
                .conflict,
                "cannot \(action) instance \(entry.id) of \(entry.app): it has exited (\(entry.exit?.description ?? "?"))"
            )
        }
        return entry
    }

    // MARK: Launches under way

    mutating func launchStarted(app: AppID, by caller: UInt32) {
        launching[app, default: 0] += 1
        launchingBy[caller, default: 0] += 1
    }

    mutating func launchEnded(app: AppID, by caller: UInt32) {
        launching[app, default: 1] -= 1
        if launching[app] == 0 { launching[app] = nil }
        launchingBy[caller, default: 1] -= 1
        if launchingBy[caller] == 0 { launchingBy[caller] = nil }
    }

    /// Launches of `app` under way.
    func launches(of app: AppID) -> Int { launching[app, default: 0] }

    /// Live instances and launches under way: in all, of `caller`'s, of `app`.
    func liveCounts(app: AppID, caller: UInt32) -> (total: Int, own: Int, app: Int) {
        var total = launching.values.reduce(0, +)
        var own = launchingBy[caller, default: 0]
        var ofApp = launching[app, default: 0]
        for entry in entries.values where entry.state.isLive {
            total += 1
            if entry.launchedBy == caller { own += 1 }
            if entry.app == app { ofApp += 1 }
        }
        return (total, own, ofApp)
    }

    /// Whether an instance of `app` other than `except` is live or launching.
    func appIsRunning(_ app: AppID, except: String? = nil) -> Bool {
        if launches(of: app) > 0 { return true }
        return entries.values.contains { $0.id != except && $0.state.isLive && $0.app == app }
    }
}
