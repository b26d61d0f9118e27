import AppdBase
import Foundation
import GRDB

/// When each app was last launched (table `appLaunches`): reclaiming Caches empties the least
/// recently launched app's first. An app never launched has no row and goes first of all.
extension Registry {
    public func recordLaunch(_ bundleID: String, at time: Date) throws {
        try write { db in
            try db.execute(
                sql: """
                    INSERT INTO appLaunches (bundleID, lastLaunchedAt) VALUES (?, ?)
                    ON CONFLICT(bundleID) DO UPDATE SET lastLaunchedAt = excluded.lastLaunchedAt
                    """, arguments: [bundleID, RegistryDates.text(for: time)])
        }
    }

    /// Each launched app's last launch.
    public func lastLaunches() throws -> [AppID: Date] {
        try read { db in
            var launches: [AppID: Date] = [:]
            for row in try Row.fetchAll(
                db, sql: "SELECT bundleID, lastLaunchedAt FROM appLaunches")
            {
                guard let id = row["bundleID"] as String?,
                    let text = row["lastLaunchedAt"] as String?,
                    let date = RegistryDates.date(from: text)
                else { continue }
                launches[AppID(id)] = date
            }
            return launches
        }
    }
}
