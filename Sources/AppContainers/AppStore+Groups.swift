import AppBundle
import AppdBase
import Foundation
import GRDB
import Glibc
import Sandbox

/// One application group's shared container (`Containers/Shared/AppGroup/<UUID>`): owned by
/// root and the group's own gid, mode 2770, so every app entitled to the group (and only those)
/// reads and writes it through that gid as a supplementary group.
///
/// A group belongs to the key whose app first used it (iOS: a team's groups), for as long as it
/// has apps (installed, or uninstalled with `--keep-data`); an app signed by another key is
/// refused at install. With its last app the container and the binding go.
public struct AppGroupRecord: Sendable, Equatable, Codable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "appGroups"
    public var groupID: String
    public var uuid: String
    public var gid: UInt32
    public var createdAt: Date
    /// The key the group is bound to; nil for a group of unsigned apps (`[Signing] UnsignedGroups`).
    public var ownerKeyID: String?
}

extension AppStore {
    /// The containers of the groups `app` uses that exist and belong to its key. Reads only:
    /// containers are created at install, so a launch, a profile or an API read never writes.
    /// A group that is missing or bound to another key is left out, and the sandbox policy
    /// reports that entitlement as refused.
    public func groupContainers(for app: InstalledApp) throws -> [SandboxSubject.GroupContainer] {
        let requested = try app.decodedEntitlements().strings(EntitlementCatalog.applicationGroups)
        guard !requested.isEmpty, let registry else { return [] }
        let known = try registry.groups(requested)
        return requested.compactMap { id in
            guard let record = known.first(where: { $0.groupID.lowercased() == id.lowercased() }),
                record.ownerKeyID == app.signerKeyID
            else { return nil }
            // The app's own spelling: the policy matches containers to its entitlement.
            return .init(
                groupID: id, path: "\(root.groupContainersPath)/\(record.uuid)", gid: record.gid)
        }
    }

    /// Refuses `groups` if another key owns any of them, naming each group and its owner.
    /// `appd verify` asks this too, so it says what install would.
    public func checkGroupOwners(_ groups: [String], keyID: String?, bundleID: String) throws {
        guard !groups.isEmpty, let registry else { return }
        let taken = try registry.groups(groups).filter { $0.ownerKeyID != keyID }
        guard !taken.isEmpty else { return }
        let owners = taken.map { "'\($0.groupID)' belongs to \(ownerDescription($0.ownerKeyID))" }
        let signer = keyID.map { "key \($0)" } ?? "no key (unsigned)"
        throw AppdError(
            .conflict,
            "\(bundleID) is signed by \(signer) and may not use application groups of another signer: \(owners.joined(separator: "; "))",
            hint:
                "a group belongs to the key whose app first used it, until its last app is uninstalled without --keep-data"
        )
    }

    /// Refuses `groups` past `[Users] MaxGroupsPerApp` (what the app asks for) or
    /// `MaxGroupsPerSigner` (the groups bound to `keyID` once the install has made those it
    /// lacks). `appd verify` asks this too; without the registry only the first is checked.
    public func checkGroupLimits(_ groups: [String], keyID: String?, bundleID: String) throws {
        let distinct = Set(groups.map { $0.lowercased() })
        guard distinct.count <= config.maxGroupsPerApp else {
            throw AppdError(
                .permissionDenied,
                "\(bundleID) uses \(distinct.count) application groups; one app may use at most \(config.maxGroupsPerApp) ([Users] MaxGroupsPerApp)",
                hint: "raise [Users] MaxGroupsPerApp= in appd.conf if the app needs them")
        }
        guard !distinct.isEmpty, let registry else { return }
        let bound = try registry.groups(ownedBy: keyID)
        let new = distinct.subtracting(bound)
        guard bound.count + new.count > config.maxGroupsPerSigner else { return }
        let signer = keyID.map { "key \($0)" } ?? "unsigned apps"
        throw AppdError(
            .permissionDenied,
            "\(bundleID) would make \(new.count) new application groups for \(signer), which has \(bound.count); one signer may have at most \(config.maxGroupsPerSigner) ([Users] MaxGroupsPerSigner)",
            hint:
                "a group is released with its last app (uninstalled without --keep-data); an admin can raise MaxGroupsPerSigner="
        )
    }

    private func ownerDescription(_ keyID: String?) -> String {
        guard let keyID else { return "unsigned apps" }
        let names = config.signing.signers.filter { $0.key?.keyID == keyID }.map { "'\($0.name)'" }
        return "key \(keyID)" + (names.isEmpty ? "" : " (signer \(names.joined(separator: ", ")))")
    }

    /// Creates the containers of `groups` that do not exist yet, bound to `keyID`. Caller holds
    /// the state lock and has checked the owners. `appUID`: the uid of the app being installed,
    /// not in the registry yet, which no group may take (with GroupRange apart from UIDRange
    /// it cannot, but a range is only as apart as the configuration says).
    func createMissingGroups(_ groups: [String], keyID: String?, appUID: UInt32) throws {
        guard !groups.isEmpty else { return }
        let registry = try writableRegistry
        let known = try registry.groups(groups)
        for id in groups
        where !known.contains(where: { $0.groupID.lowercased() == id.lowercased() }) {
            try createGroup(id, keyID: keyID, appUID: appUID, registry: registry)
        }
    }

    /// Staged, published by rename, then recorded: a crash leaves at most an unnamed container,
    /// or a group no app uses, both of which recovery removes.
    private func createGroup(_ id: String, keyID: String?, appUID: UInt32, registry: Registry)
        throws
    {
        let allocator = UIDAllocator(range: config.groupRange)
        let groups = try registry.usedGroupIDs()
        let gid = try allocator.allocate(
            excluding: try registry.usedUIDs().union([appUID]),
            exhausted: AppdError(
                .conflict,
                "no free gid left in [Users] GroupRange=\(config.groupRange.lowerBound)-\(config.groupRange.upperBound): \(allocator.held(groups)) application groups hold one (the rest are the host's accounts, groups or subordinate ids)",
                hint: "widen [Users] GroupRange= in appd.conf"))
        let uuid = UUID().uuidString
        let staging = try FileDescriptor.directory(root.stagingPath)
        let name = "group-\(uuid)"
        let dir = try staging.makeDirectory(name, mode: 0o700)
        try dir.chown(uid: 0, gid: gid)
        try dir.chmod(0o2770)
        // Writable by its apps like a data container, so limited like one (its own project).
        try applyGroupQuota(dir, gid: gid)
        try dir.sync()
        let parent = try FileDescriptor.directory(root.groupContainersPath)
        try staging.rename(name, to: parent, as: uuid)
        try parent.sync()
        try registry.saveGroup(
            AppGroupRecord(groupID: id, uuid: uuid, gid: gid, createdAt: Date(), ownerKeyID: keyID))
    }

    /// Removes those of `candidates` that no app (installed or data kept) uses any more: the
    /// row first, then the container, so a crash leaves an unnamed container for recovery.
    /// Caller holds the state lock.
    func removeUnusedGroups(_ candidates: [String], into report: inout RecoveryReport) throws {
        guard !candidates.isEmpty else { return }
        let registry = try writableRegistry
        let used = try registry.groupsInUse()
        let groupDir = try FileDescriptor.directory(root.groupContainersPath)
        for record in try registry.groups(candidates)
        where !used.contains(record.groupID.lowercased()) {
            try registry.deleteGroup(record.groupID)
            // The group's apps wrote this tree: what cannot be removed is quarantined, reported,
            // and blocks nothing.
            _ = discardReporting(record.uuid, in: groupDir, into: &report)
            clearDataQuota(uid: record.gid)
        }
    }
}

extension Registry {
    func groups(_ ids: [String]) throws -> [AppGroupRecord] {
        try read { db in
            try AppGroupRecord.filter(
                sql: "groupID COLLATE NOCASE IN (\(ids.map { _ in "?" }.joined(separator: ",")))",
                arguments: StatementArguments(ids)
            ).fetchAll(db)
        }
    }

    public func allGroups() throws -> [AppGroupRecord] {
        try read { db in try AppGroupRecord.fetchAll(db) }
    }

    /// The ids (lowercased) of the groups bound to `keyID` (nil: unsigned apps' groups).
    func groups(ownedBy keyID: String?) throws -> Set<String> {
        try read { db in
            Set(
                try String.fetchAll(
                    db, sql: "SELECT groupID FROM appGroups WHERE ownerKeyID IS ?",
                    arguments: [keyID]
                ).map { $0.lowercased() })
        }
    }

    func usedGroupIDs() throws -> Set<UInt32> {
        try read { db in Set(try UInt32.fetchAll(db, sql: "SELECT gid FROM appGroups")) }
    }

    func saveGroup(_ record: AppGroupRecord) throws {
        try write { db in try record.insert(db) }
    }

    func deleteGroup(_ id: String) throws {
        try write { db in
            try db.execute(
                sql: "DELETE FROM appGroups WHERE groupID = ? COLLATE NOCASE", arguments: [id])
        }
    }

    /// Every group id some app row requests (lowercased), kept data included. An app whose
    /// entitlements no longer decode keeps every group (it cannot be told it has none).
    func groupsInUse() throws -> Set<String> {
        let rows = try read { db in
            try Row.fetchAll(
                db, sql: "SELECT entitlements FROM apps WHERE entitlements IS NOT NULL")
        }
        var used = Set<String>()
        for row in rows {
            guard let data = row["entitlements"] as Data? else { continue }
            guard let entitlements = try? Entitlements(plistData: data) else {
                return Set(try allGroups().map { $0.groupID.lowercased() })
            }
            for id in entitlements.strings(EntitlementCatalog.applicationGroups) {
                used.insert(id.lowercased())
            }
        }
        return used
    }
}

extension AppGroupRecord {
    public static func databaseDateEncodingStrategy(for column: String)
        -> DatabaseDateEncodingStrategy
    {
        RegistryDates.encoding
    }

    public static func databaseDateDecodingStrategy(for column: String)
        -> DatabaseDateDecodingStrategy
    {
        RegistryDates.decoding
    }
}
