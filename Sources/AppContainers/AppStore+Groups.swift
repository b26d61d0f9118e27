import AppBundle
import Foundation
import GRDB
import Glibc
import Sandbox

/// One application group's shared container (`Containers/Shared/AppGroup/<UUID>`): owned by
/// root and the group's own gid, mode 2770, so every app entitled to the group (and only those)
/// reads and writes it through that gid as a supplementary group.
public struct AppGroupRecord: Sendable, Equatable, Codable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "appGroups"
    public var groupID: String
    public var uuid: String
    public var gid: UInt32
    public var createdAt: Date
}

extension AppStore {
    /// The containers of the groups `app` is entitled to, created on first use. Group ids are
    /// validated like bundle ids (`group.com.example.shared`).
    public func groupContainers(for app: InstalledApp, onWait: () -> Void = {}) throws
        -> [SandboxSubject.GroupContainer]
    {
        let requested = try app.decodedEntitlements().strings(EntitlementCatalog.applicationGroups)
        guard !requested.isEmpty else { return [] }
        for id in requested {
            guard (try? BundleIdentifier(validating: id)) != nil else {
                throw AppdError(.invalidBundle,
                    "\(app.bundleID): application group \(id.debugDescription) is not a valid group id",
                    hint: "group ids look like bundle ids, e.g. group.com.example.shared")
            }
        }
        let registry = try writableRegistry
        var known = try registry.groups(requested)
        if known.count < requested.count {
            let lock = try StateLock(root, onWait: onWait)
            defer { withExtendedLifetime(lock) {} }
            known = try registry.groups(requested)
            for id in requested where !known.contains(where: { $0.groupID.lowercased() == id.lowercased() }) {
                known.append(try createGroup(id, registry: registry))
            }
        }
        return known.map {
            .init(groupID: $0.groupID, path: "\(root.groupContainersPath)/\($0.uuid)", gid: $0.gid)
        }
    }

    /// Staged, published by rename, then recorded: a crash leaves at most an unnamed container,
    /// which recovery removes.
    private func createGroup(_ id: String, registry: Registry) throws -> AppGroupRecord {
        let taken = try registry.usedUIDs().union(registry.usedGroupIDs())
        let gid = try UIDAllocator(range: config.uidRange).allocate(excluding: taken)
        let uuid = UUID().uuidString
        let staging = try FileDescriptor.directory(root.stagingPath)
        let name = "group-\(uuid)"
        let dir = try staging.makeDirectory(name, mode: 0o700)
        try dir.chown(uid: 0, gid: gid)
        try dir.chmod(0o2770)
        try dir.sync()
        let parent = try FileDescriptor.directory(root.groupContainersPath)
        try staging.rename(name, to: parent, as: uuid)
        try parent.sync()
        let record = AppGroupRecord(groupID: id, uuid: uuid, gid: gid, createdAt: Date())
        try registry.saveGroup(record)
        return record
    }
}

extension Registry {
    func groups(_ ids: [String]) throws -> [AppGroupRecord] {
        try read { db in
            try AppGroupRecord.filter(sql: "groupID IN (\(ids.map { _ in "?" }.joined(separator: ",")))",
                arguments: StatementArguments(ids)).fetchAll(db)
        }
    }

    public func allGroups() throws -> [AppGroupRecord] {
        try read { db in try AppGroupRecord.fetchAll(db) }
    }

    func usedGroupIDs() throws -> Set<UInt32> {
        try read { db in Set(try UInt32.fetchAll(db, sql: "SELECT gid FROM appGroups")) }
    }

    func saveGroup(_ record: AppGroupRecord) throws {
        try write { db in try record.insert(db) }
    }
}

extension AppGroupRecord {
    public static func databaseDateEncodingStrategy(for column: String) -> DatabaseDateEncodingStrategy {
        RegistryDates.encoding
    }

    public static func databaseDateDecodingStrategy(for column: String) -> DatabaseDateDecodingStrategy {
        RegistryDates.decoding
    }
}
