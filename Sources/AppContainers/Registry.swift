import AppBundle
import AppdBase
import Foundation
import GRDB

/// The registry: `registry.sqlite` under the state root (SQLite via GRDB, WAL journal).
///
/// Bundle ids are unique *without regard to case*: `com.Example.App` and `com.example.app`
/// cannot both be installed, because case-insensitive filesystems, DNS and people all treat
/// them as one name (Apple's App Store does the same). Lookups are case-insensitive too.
public final class Registry: Sendable {
    private let db: DatabasePool

    /// Opens (creating if needed) the registry at `path` and migrates it to the current schema.
    public init(path: String) throws {
        var config = Configuration()
        // A committed install must survive power loss, not only a crash: installs are rare.
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        config.busyMode = .timeout(10)
        // One opener at a time, across processes: GRDB's migrator reads which migrations are
        // applied, then applies each in its own transaction, so two openers of a new or older
        // registry both ran "v1" (the second failed: `table "apps" already exists`); and the
        // switch to WAL takes a lock SQLite's busy handler does not wait for ("database is
        // locked" at once). An flock on the registry's folder, held only while opening; not
        // the state lock, which a caller may hold already.
        let folderPath = (path as NSString).deletingLastPathComponent
        let folder = open(folderPath.isEmpty ? "." : folderPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if folder >= 0 {
            _ = retryingInterrupts { flock(folder, LOCK_EX) }
        }
        defer { if folder >= 0 { close(folder) } }
        do {
            db = try DatabasePool(path: path, configuration: config)
            try Self.migrator.migrate(db)
        } catch let error as DatabaseError {
            throw AppdError(
                .corruptState, "registry \(path): \(error.message ?? "\(error)")",
                hint: "run 'appd doctor' to check the state root")
        }
        // The registry names every uid and container: nobody but root reads it.
        chmod(path, 0o600)
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "apps") { t in
                t.column("bundleID", .text).notNull().primaryKey().collate(.nocase)
                t.column("state", .text).notNull()
                t.column("uid", .integer).notNull().unique()
                t.column("dataUUID", .text).notNull().unique()
                t.column("bundleUUID", .text).unique()
                t.column("bundleName", .text)
                t.column("title", .text)
                t.column("version", .text)
                t.column("shortVersion", .text)
                t.column("executable", .text)
                t.column("layout", .text)
                t.column("entitlements", .blob)
                t.column("fileCount", .integer)
                t.column("totalBytes", .integer)
                t.column("installedAt", .datetime).notNull()
                t.column("updatedAt", .datetime).notNull()
            }
        }
        migrator.registerMigration("v2-app-groups") { db in
            try db.create(table: "appGroups") { t in
                t.column("groupID", .text).notNull().primaryKey().collate(.nocase)
                t.column("uuid", .text).notNull().unique()
                t.column("gid", .integer).notNull().unique()
                t.column("createdAt", .datetime).notNull()
            }
        }
        migrator.registerMigration("v3-code-signing") { db in
            try db.alter(table: "apps") { t in
                t.add(column: "signerKeyID", .text)
                t.add(column: "codeResourcesHash", .blob)
                t.add(column: "executableHash", .blob)
                t.add(column: "treeHash", .blob)
            }
        }
        migrator.registerMigration("v4-group-owners") { db in
            try db.alter(table: "appGroups") { t in t.add(column: "ownerKeyID", .text) }
            // Groups were claimed by whichever app launched first: bind each to the key of the
            // earliest installed app that uses it. A group no app uses is removed by recovery.
            let rows = try Row.fetchAll(
                db, sql: "SELECT signerKeyID, entitlements FROM apps ORDER BY installedAt DESC")
            for row in rows {
                guard let data = row["entitlements"] as Data?,
                    let entitlements = try? Entitlements(plistData: data)
                else { continue }
                for id in entitlements.strings(EntitlementCatalog.applicationGroups) {
                    try db.execute(
                        sql: "UPDATE appGroups SET ownerKeyID = ? WHERE groupID = ? COLLATE NOCASE",
                        arguments: [row["signerKeyID"] as String?, id])
                }
            }
        }
        migrator.registerMigration("v5-last-launch") { db in
            // When each app was last launched: what reclaiming Caches goes by (least recently
            // launched first). Its own table: a launch writes one row, never the app's.
            try db.create(table: "appLaunches") { t in
                t.column("bundleID", .text).notNull().primaryKey().collate(.nocase)
                t.column("lastLaunchedAt", .datetime).notNull()
            }
        }
        return migrator
    }

    /// The app whose id matches `id` without regard to case, in any state.
    public func app(_ id: String) throws -> InstalledApp? {
        try read { db in
            try InstalledApp.filter(sql: "bundleID = ? COLLATE NOCASE", arguments: [id]).fetchOne(
                db)
        }
    }

    /// Every row, sorted by bundle id.
    public func apps() throws -> [InstalledApp] {
        try read { db in try InstalledApp.order(sql: "bundleID COLLATE NOCASE").fetchAll(db) }
    }

    /// uids of apps and gids of application groups. Groups have their own range
    /// (`[Users] GroupRange`), but a state root from before it holds groups whose gids came
    /// from the apps' range: every number either holds is taken for both.
    public func usedUIDs() throws -> Set<UInt32> {
        try read { db in
            Set(
                try UInt32.fetchAll(db, sql: "SELECT uid FROM apps UNION SELECT gid FROM appGroups")
            )
        }
    }

    /// The uids of the apps (installed, or uninstalled with their data kept).
    func appUIDs() throws -> [UInt32] {
        try read { db in try UInt32.fetchAll(db, sql: "SELECT uid FROM apps") }
    }

    /// Inserts or replaces the row for `app.bundleID`, in one transaction.
    public func save(_ app: InstalledApp) throws {
        try write { db in try app.save(db) }
    }

    public func delete(_ bundleID: String) throws {
        try write { db in _ = try InstalledApp.deleteOne(db, key: bundleID) }
    }

    /// SQLite's own consistency check; empty when all is well.
    public func integrityProblems() throws -> [String] {
        try read { db in
            try String.fetchAll(db, sql: "PRAGMA integrity_check").filter { $0 != "ok" }
        }
    }

    func read<T>(_ body: (Database) throws -> T) throws -> T {
        do { return try db.read(body) } catch let error as DatabaseError {
            throw AppdError(.corruptState, "registry read failed: \(error.message ?? "\(error)")")
        }
    }

    func write<T>(_ body: (Database) throws -> T) throws -> T {
        do { return try db.write(body) } catch let error as DatabaseError {
            throw AppdError(.corruptState, "registry write failed: \(error.message ?? "\(error)")")
        }
    }
}
