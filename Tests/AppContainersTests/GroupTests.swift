import AppBundle
import Foundation
import GRDB
import Testing

@testable import AppContainers
@testable import AppdConfig

/// Application groups as on iOS: a signer's policy grants ids by pattern, the first install
/// binds a group to its key, and the container goes with the group's last app.
@Suite("application groups belong to one signer and go with their last app", .serialized, rootOnly)
struct GroupTests {
    static let groupKey = "com.apple.security.application-groups"

    func bundle(_ scratch: Scratch, _ id: String, groups: [String], signer: Signer?) throws
        -> String
    {
        let path = try makeBundle(
            at: scratch.sub("src-\(id)/Hello.app"), id: id,
            entitlements: ["com.apple.security.app-sandbox": true, Self.groupKey: groups])
        if let signer { try signer.sign(path) }
        return path
    }

    func trusted(_ signer: Signer, groups: [String]) throws -> SigningPolicy.Signer {
        var section = try signer.trusted(entitlements: ["*"])
        section.groups = groups
        return section
    }

    @Test("a signer may use only the group ids its Groups= grants; without Groups= none")
    func signerGrants() throws {
        let scratch = Scratch()
        let dev = try Signer("dev")
        let app = try bundle(
            scratch, "com.example.a", groups: ["group.com.example.shared", "group.org.other"],
            signer: dev)
        let none = failure {
            _ = try store(
                scratch.sub("root"),
                config: config(trusting: [try dev.trusted(entitlements: ["*"])])
            )
            .install(bundleAt: app)
        }
        #expect(none?.code == .permissionDenied)
        #expect(
            none?.message
                == "com.example.a uses application groups that signer 'dev' (key \(dev.keyID)) may not use: group.com.example.shared, group.org.other"
        )
        let partial = failure {
            _ = try store(
                scratch.sub("root"),
                config: config(trusting: [try trusted(dev, groups: ["GROUP.com.example.*"])])
            )
            .install(bundleAt: app)
        }
        #expect(
            partial?.message.hasSuffix("may not use: group.org.other") == true,
            "\(String(describing: partial))")
        let result = try store(
            scratch.sub("root"),
            config: config(trusting: [
                try trusted(dev, groups: ["group.com.example.*", "group.org.other"])
            ])
        )
        .install(bundleAt: app)
        #expect(result.signing.groups == ["group.com.example.shared", "group.org.other"])
        let groups = try #require(store(scratch.sub("root")).registry).allGroups()
        #expect(Set(groups.map(\.groupID)) == ["group.com.example.shared", "group.org.other"])
        #expect(groups.allSatisfy { $0.ownerKeyID == dev.keyID })
    }

    @Test("an unsigned app gets no group unless [Signing] UnsignedGroups lists it")
    func unsignedGroups() throws {
        let scratch = Scratch()
        let app = try bundle(
            scratch, "com.example.u", groups: ["group.com.example.dev"], signer: nil)
        let refused = failure {
            _ = try store(scratch.sub("root"), config: unsignedConfig).install(bundleAt: app)
        }
        #expect(refused?.code == .permissionDenied)
        #expect(
            refused?.message
                == "com.example.u uses application groups that an unsigned app ([Signing] UnsignedGroups) may not use: group.com.example.dev"
        )
        #expect(try store(scratch.sub("root")).apps().isEmpty)
        #expect(entries(StateRoot(path: scratch.sub("root")).groupContainersPath).isEmpty)
        var listed = unsignedConfig
        listed.signing.unsignedGroups = ["group.com.example.dev"]
        #expect(
            try store(scratch.sub("root"), config: listed).install(bundleAt: app).signing.groups
                == ["group.com.example.dev"])
        let record = try #require(try store(scratch.sub("root")).registry?.allGroups().first)
        #expect(record.ownerKeyID == nil)
    }

    @Test(
        "the second signer's app is refused the first signer's group, naming the group and its owner"
    )
    func secondSignerRefused() throws {
        let scratch = Scratch()
        let first = try Signer("first")
        let second = try Signer("second")
        // An admin's overlapping patterns: both signers may use the id. The binding decides.
        let policy = config(trusting: [
            try trusted(first, groups: ["group.com.example.*"]),
            try trusted(second, groups: ["group.*"]),
        ])
        let root = scratch.sub("root")
        try store(root, config: policy).install(
            bundleAt: bundle(
                scratch, "com.example.first", groups: ["group.com.example.shared"], signer: first))
        let container = try #require(try store(root).registry?.allGroups().first)
        try "secret".write(
            toFile: "\(store(root).root.groupContainersPath)/\(container.uuid)/note",
            atomically: false, encoding: .utf8)

        let claim = try bundle(
            scratch, "com.example.second", groups: ["GROUP.com.example.shared"], signer: second)
        let error = failure { _ = try store(root, config: policy).install(bundleAt: claim) }
        #expect(error?.code == .conflict)
        #expect(
            error?.message
                == "com.example.second is signed by key \(second.keyID) and may not use application groups of another signer: 'group.com.example.shared' belongs to key \(first.keyID) (signer 'first')"
        )
        #expect(try store(root).apps().map(\.bundleID) == ["com.example.first"])
        // The store's read-only answer agrees (what appd verify asks).
        #expect(
            failure {
                try store(root, config: policy).checkGroupOwners(
                    ["group.com.example.shared"], keyID: second.keyID, bundleID: "x")
            }?.code == .conflict)
        // An unsigned app listed by the admin is refused the signed group as well.
        var unsigned = policy
        unsigned.signing.allowUnsigned = true
        unsigned.signing.unsignedGroups = ["*"]
        let anon = try bundle(
            scratch, "com.example.anon", groups: ["group.com.example.shared"], signer: nil)
        #expect(
            failure { _ = try store(root, config: unsigned).install(bundleAt: anon) }?.message
                .contains("belongs to key \(first.keyID)") == true)
        try expectConsistent(root)
    }

    @Test(
        "the container goes with the last app (kept, still bound, with --keep-data); a later claimant starts empty"
    )
    func lastAppTakesTheContainer() throws {
        let scratch = Scratch()
        let first = try Signer("first")
        let second = try Signer("second")
        let policy = config(trusting: [
            try trusted(first, groups: ["*"]), try trusted(second, groups: ["*"]),
        ])
        let root = scratch.sub("root")
        let group = "group.com.example.shared"
        for id in ["com.example.one", "com.example.two"] {
            try store(root, config: policy).install(
                bundleAt: bundle(scratch, id, groups: [group], signer: first))
        }
        let record = try #require(try store(root).registry?.allGroups().first)
        let path = "\(StateRoot(path: root).groupContainersPath)/\(record.uuid)"
        try "left".write(toFile: "\(path)/note", atomically: false, encoding: .utf8)

        _ = try store(root, config: policy).uninstall("com.example.one", keepData: false)
        #expect(FileManager.default.fileExists(atPath: "\(path)/note"), "another app still uses it")
        _ = try store(root, config: policy).uninstall("com.example.two", keepData: true)
        #expect(FileManager.default.fileExists(atPath: "\(path)/note"), "kept with --keep-data")
        let claim = try bundle(scratch, "com.example.claim", groups: [group], signer: second)
        #expect(
            failure { _ = try store(root, config: policy).install(bundleAt: claim) }?.code
                == .conflict, "still bound")

        _ = try store(root, config: policy).uninstall("com.example.two", keepData: false)
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(try store(root).registry?.allGroups().isEmpty == true)
        #expect(entries(StateRoot(path: root).groupContainersPath).isEmpty)
        // The id is free again: a new owner gets a new, empty container.
        try store(root, config: policy).install(bundleAt: claim)
        let fresh = try #require(try store(root).registry?.allGroups().first)
        #expect(fresh.uuid != record.uuid && fresh.ownerKeyID == second.keyID)
        #expect(entries("\(StateRoot(path: root).groupContainersPath)/\(fresh.uuid)").isEmpty)
        try expectConsistent(root)
    }

    @Test(
        "an upgrade that drops a group removes it if it was the last user; recovery removes groups no app uses"
    )
    func upgradeAndRecovery() throws {
        let scratch = Scratch()
        let dev = try Signer("dev")
        let policy = config(trusting: [try trusted(dev, groups: ["*"])])
        let root = scratch.sub("root")
        try store(root, config: policy).install(
            bundleAt: bundle(scratch, "com.example.a", groups: ["group.a", "group.b"], signer: dev))
        let v2 = try makeBundle(
            at: scratch.sub("v2/Hello.app"), id: "com.example.a", version: "2",
            entitlements: ["com.apple.security.app-sandbox": true, Self.groupKey: ["group.a"]])
        try dev.sign(v2)
        try store(root, config: policy).install(bundleAt: v2)
        #expect(try store(root).registry?.allGroups().map(\.groupID) == ["group.a"])
        #expect(entries(StateRoot(path: root).groupContainersPath).count == 1)

        // An uninstall stopped after its commit leaves a group without apps.
        try #require(try store(root).registry).delete("com.example.a")
        let next = try store(root, config: policy).install(
            bundleAt: bundle(scratch, "com.example.other", groups: [], signer: dev))
        #expect(next.recovery.unusedGroups == ["group.a"])
        #expect(try store(root).registry?.allGroups().isEmpty == true)
        #expect(entries(StateRoot(path: root).groupContainersPath).isEmpty)
    }

    @Test("groupContainers only reads: a missing container is not created")
    func containersOnlyRead() throws {
        let scratch = Scratch()
        let dev = try Signer("dev")
        let policy = config(trusting: [try trusted(dev, groups: ["*"])])
        let root = scratch.sub("root")
        try store(root, config: policy).install(
            bundleAt: bundle(scratch, "com.example.a", groups: ["group.a"], signer: dev))
        let store = try store(root, config: policy)
        let app = try store.app("com.example.a")
        #expect(try store.groupContainers(for: app).map(\.groupID) == ["group.a"])
        // As in a state root from before groups were made at install.
        try #require(store.registry).deleteGroup("group.a")
        let before = entries(store.root.groupContainersPath)
        #expect(try store.groupContainers(for: app).isEmpty)
        #expect(entries(store.root.groupContainersPath) == before)
        #expect(try store.registry?.allGroups().isEmpty == true)
    }

    @Test("doctor reports a missing or wrongly owned group container and repairs it")
    func doctor() throws {
        let scratch = Scratch()
        let dev = try Signer("dev")
        let policy = config(trusting: [try trusted(dev, groups: ["*"])])
        let root = scratch.sub("root")
        try store(root, config: policy).install(
            bundleAt: bundle(scratch, "com.example.a", groups: ["group.a"], signer: dev))
        let record = try #require(try store(root).registry?.allGroups().first)
        let path = "\(StateRoot(path: root).groupContainersPath)/\(record.uuid)"
        #expect(try store(root, config: policy).doctor(repair: false).findings.isEmpty)
        chmod(path, 0o777)
        let wrong = try store(root, config: policy).doctor(repair: true).findings
        #expect(wrong.map(\.repair) == ["reset to root:\(record.gid) mode 2770"], "\(wrong)")
        #expect(statOf(path).map { $0.st_mode & 0o7777 } == 0o2770)
        rmdir(path)
        let check = try store(root, config: policy).doctor(repair: false).findings
        #expect(
            check.map(\.problem) == ["its container \(path) is missing"]
                && check.first?.repair == nil)
        let repaired = try store(root, config: policy).doctor(repair: true).findings
        #expect(repaired.map(\.repair) == ["recreated empty"])
        #expect(
            statOf(path).map { ($0.st_uid, $0.st_gid, $0.st_mode & 0o7777) } ?? (1, 1, 0) == (
                0, record.gid, 0o2770
            ))
    }

    @Test("Groups= and UnsignedGroups= are read from appd.conf and checked as patterns")
    func parse() throws {
        let identity = SigningIdentity.generate(name: "dev")
        let inline = "ed25519:" + Data(identity.publicKey.raw).base64EncodedString()
        let config = try AppdConfiguration.parse(
            "[Signing]\nUnsignedGroups=group.dev.*\n[Signer dev]\nKey=\(inline)\nGroups=group.com.example.* group.x\n",
            file: "t.conf")
        #expect(config.signing.unsignedGroups == ["group.dev.*"])
        #expect(config.signing.signers[0].groups == ["group.com.example.*", "group.x"])
        #expect(AppdConfiguration().signing.unsignedGroups.isEmpty)
        let bad = failure {
            _ = try AppdConfiguration.parse("[Signer a]\nGroups=group.*.x\n", file: "t.conf")
        }
        #expect(
            bad?.message
                == "t.conf:2: [Signer a] Groups=group.*.x is not a list of patterns (exact, a prefix ending in *, or *)"
        )
    }
}

@Suite("registry migration v4: existing groups get an owner")
struct GroupMigrationTests {
    @Test("each existing group is bound to the key of the earliest installed app that uses it")
    func bindsToEarliestApp() throws {
        let scratch = Scratch()
        let path = scratch.sub("registry.sqlite")
        let queue = try DatabaseQueue(path: path)
        try Registry.migrator.migrate(queue, upTo: "v3-code-signing")
        func entitlements(_ groups: [String]) throws -> Data {
            try Entitlements(values: [
                "com.apple.security.application-groups": .array(groups.map { .string($0) })
            ]).plistData()
        }
        try queue.write { db in
            // The second signer's app was installed later but claimed the group too (the bug).
            for (id, key, uid, installed, groups) in [
                (
                    "com.example.late", "bbbb", 2_000_000_001, "2026-02-01 00:00:00.000",
                    ["group.shared"]
                ),
                (
                    "com.example.early", "aaaa", 2_000_000_000, "2026-01-01 00:00:00.000",
                    ["GROUP.shared", "group.a"]
                ),
            ] {
                try db.execute(
                    sql: """
                        INSERT INTO apps (bundleID, state, uid, dataUUID, installedAt, updatedAt, entitlements, signerKeyID)
                        VALUES (?, 'installed', ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        id, uid, UUID().uuidString, installed, installed, try entitlements(groups),
                        key,
                    ])
            }
            for (group, gid) in [
                ("group.shared", 2_000_000_010), ("group.a", 2_000_000_011),
                ("group.unused", 2_000_000_012),
            ] {
                try db.execute(
                    sql:
                        "INSERT INTO appGroups (groupID, uuid, gid, createdAt) VALUES (?, ?, ?, '2026-01-01 00:00:00.000')",
                    arguments: [group, UUID().uuidString, gid])
            }
        }
        let registry = try Registry(path: path)
        let owners = Dictionary(
            uniqueKeysWithValues: try registry.allGroups().map { ($0.groupID, $0.ownerKeyID) })
        #expect(owners["group.shared"] == "aaaa")
        #expect(owners["group.a"] == "aaaa")
        #expect(owners["group.unused"] == .some(nil))
        #expect(try registry.groupsInUse() == ["group.shared", "group.a"])
    }
}
