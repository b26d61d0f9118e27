import AppBundle
import AppdBase
import Foundation
import Testing

@testable import AppContainers
@testable import AppdConfig

/// Application groups take gids from `[Users] GroupRange`, apart from the apps' `UIDRange`,
/// and no app or signer may hold more than `MaxGroupsPerApp` / `MaxGroupsPerSigner` of them:
/// a signer whose `Groups=` pattern allows any id cannot stop other signers' installs.
@Suite("application groups cannot starve installs", .serialized, rootOnly)
struct GroupLimitTests {
    static let uids: ClosedRange<UInt32> = 2_000_000_000...2_000_000_004
    static let gids: ClosedRange<UInt32> = 2_000_100_000...2_000_100_039

    func bundle(_ scratch: Scratch, _ id: String, groups: [String], signer: Signer) throws -> String
    {
        let path = try makeBundle(
            at: scratch.sub("src-\(id)/Hello.app"), id: id,
            entitlements: ["com.apple.security.app-sandbox": true, GroupTests.groupKey: groups])
        return try signer.sign(path)
    }

    func install(
        _ root: String, _ config: AppdConfiguration, _ scratch: Scratch, _ id: String,
        groups: [String],
        signer: Signer
    ) throws {
        try store(root, config: config).install(
            bundleAt: bundle(scratch, id, groups: groups, signer: signer))
    }

    /// What installing `id` throws, or nil.
    func refusal(
        _ root: String, _ config: AppdConfiguration, _ scratch: Scratch, _ id: String,
        groups: [String],
        signer: Signer
    ) -> AppdError? {
        failure { try install(root, config, scratch, id, groups: groups, signer: signer) }
    }

    /// Signers that may use any group id (the attacker's `Groups=*`), and small ranges.
    func policy(_ signers: [Signer], perApp: Int = 8, perSigner: Int = 12) throws
        -> AppdConfiguration
    {
        var config = config(
            trusting: try signers.map { signer in
                var section = try signer.trusted(entitlements: ["*"])
                section.groups = ["*"]
                return section
            })
        config.uidRange = Self.uids
        config.groupRange = Self.gids
        config.maxGroupsPerApp = perApp
        config.maxGroupsPerSigner = perSigner
        return config
    }

    @Test(
        "a signer with Groups=* using more groups than the apps' range holds leaves every uid to apps"
    )
    func separateRange() throws {
        let scratch = Scratch()
        let wide = try Signer("wide")
        let other = try Signer("other")
        let config = try policy([wide, other], perApp: 30, perSigner: 30)
        let root = scratch.sub("root")
        // 30 groups: six times the five uids apps have. With one shared range the first
        // install took them all and the next install of anyone failed "no free uid".
        let many = (0..<30).map { "group.attack.\($0)" }
        try install(root, config, scratch, "com.attack.many", groups: many, signer: wide)
        for n in 0..<4 {
            try install(root, config, scratch, "com.example.app\(n)", groups: [], signer: other)
        }
        let registry = try #require(try store(root).registry)
        #expect(try registry.apps().allSatisfy { Self.uids.contains($0.uid) })
        let groups = try registry.allGroups()
        #expect(groups.count == 30)
        #expect(groups.allSatisfy { Self.gids.contains($0.gid) })
        try expectConsistent(root)
    }

    @Test(
        "past MaxGroupsPerApp or MaxGroupsPerSigner an install is refused, counting what it says; nothing is made"
    )
    func limits() throws {
        let scratch = Scratch()
        let wide = try Signer("wide")
        let other = try Signer("other")
        let config = try policy([wide, other])
        let root = scratch.sub("root")
        let nine = (0..<9).map { "group.a.\($0)" }
        let perApp = refusal(root, config, scratch, "com.attack.nine", groups: nine, signer: wide)
        #expect(perApp?.code == .permissionDenied)
        #expect(
            perApp?.message
                == "com.attack.nine uses 9 application groups; one app may use at most 8 ([Users] MaxGroupsPerApp)"
        )

        try store(root, config: config).install(
            bundleAt: bundle(scratch, "com.attack.one", groups: Array(nine.prefix(8)), signer: wide)
        )
        // Two of its groups again and six new: 8 + 6 = 14 > 12.
        let second = (6..<8).map { "group.a.\($0)" } + (0..<6).map { "group.b.\($0)" }
        let perSigner = refusal(
            root, config, scratch, "com.attack.two", groups: second, signer: wide)
        #expect(perSigner?.code == .permissionDenied)
        #expect(
            perSigner?.message
                == "com.attack.two would make 6 new application groups for key \(wide.keyID), which has 8; one signer may have at most 12 ([Users] MaxGroupsPerSigner)"
        )
        #expect(
            try store(root).registry?.allGroups().count == 8, "a refused install makes no group")
        // Four new is within the limit; another signer's groups are its own count.
        try install(
            root, config, scratch, "com.attack.three", groups: (0..<4).map { "group.c.\($0)" },
            signer: wide)
        try install(
            root, config, scratch, "com.example.own", groups: (0..<8).map { "group.o.\($0)" },
            signer: other)
        #expect(try store(root).registry?.allGroups().count == 20)
        try expectConsistent(root)
    }

    @Test("a full range's error counts what holds it: apps for UIDRange, groups for GroupRange")
    func exhaustedCounts() throws {
        let scratch = Scratch()
        let dev = try Signer("dev")
        var config = try policy([dev], perApp: 30, perSigner: 30)
        config.groupRange = 2_000_100_000...2_000_100_002
        let root = scratch.sub("root")
        try install(
            root, config, scratch, "com.example.g", groups: ["g.1", "g.2", "g.3"], signer: dev)
        let groupsFull = refusal(
            root, config, scratch, "com.example.h", groups: ["g.4"], signer: dev)
        #expect(groupsFull?.code == .conflict)
        #expect(
            groupsFull?.message
                == "no free gid left in [Users] GroupRange=2000100000-2000100002: 3 application groups hold one (the rest are the host's accounts, groups or subordinate ids)"
        )
        for n in 0..<4 {
            try install(root, config, scratch, "com.example.app\(n)", groups: [], signer: dev)
        }
        let appsFull = refusal(root, config, scratch, "com.example.last", groups: [], signer: dev)
        #expect(
            appsFull?.message
                == "no free uid left in [Users] UIDRange=2000000000-2000000004: 5 apps hold one (the rest are the host's accounts, groups or subordinate ids)"
        )
        try expectConsistent(root)
    }

    @Test(
        "a state root whose groups got gids from the apps' range keeps them; new apps go around them, new groups use GroupRange"
    )
    func upgradeFromSharedRange() throws {
        let scratch = Scratch()
        let dev = try Signer("dev")
        let root = scratch.sub("root")
        // What appd before GroupRange did: groups from the apps' range.
        var before = try policy([dev], perApp: 30, perSigner: 30)
        before.groupRange = Self.uids
        try install(
            root, before, scratch, "com.example.old", groups: ["group.old.1", "group.old.2"],
            signer: dev)
        let legacy = try #require(try store(root).registry?.allGroups())
        #expect(legacy.allSatisfy { Self.uids.contains($0.gid) })
        // Made in the same install as the app, before its row: still never the app's own number.
        let oldApp = try #require(try store(root).registry?.app("com.example.old"))
        #expect(!legacy.map(\.gid).contains(oldApp.uid))

        let after = try policy([dev], perApp: 30, perSigner: 30)
        // Another app of the group shares it, gid and container unchanged; a new group comes
        // from GroupRange; new apps get the uids the old groups do not hold.
        try install(
            root, after, scratch, "com.example.new", groups: ["group.old.1", "group.new"],
            signer: dev)
        let registry = try #require(try store(root).registry)
        let groups = try registry.allGroups()
        for old in legacy {
            #expect(groups.first { $0.groupID == old.groupID } == old)
        }
        #expect(
            try #require(groups.first { $0.groupID == "group.new" }).gid == Self.gids.lowerBound)
        let app = try #require(try registry.app("com.example.new"))
        #expect(!legacy.map(\.gid).contains(app.uid))
        // The app's sandbox gets the old group at its old gid.
        let containers = try store(root, config: after).groupContainers(for: app)
        #expect(containers.first { $0.groupID == "group.old.1" }?.gid == legacy[0].gid)

        // Two uids left of five (old app, new app, two legacy groups): the error says why.
        try install(root, after, scratch, "com.example.third", groups: [], signer: dev)
        let full = refusal(root, after, scratch, "com.example.fourth", groups: [], signer: dev)
        #expect(
            full?.message
                == "no free uid left in [Users] UIDRange=2000000000-2000000004: 3 apps hold one, and 2 application groups made before GroupRange existed hold their gid (the rest are the host's accounts, groups or subordinate ids)"
        )
        // The legacy gids go with their last app, back to the apps.
        _ = try store(root, config: after).uninstall("com.example.old", keepData: false)
        _ = try store(root, config: after).uninstall("com.example.new", keepData: false)
        #expect(try store(root).registry?.allGroups().isEmpty == true)
        try install(root, after, scratch, "com.example.fourth", groups: [], signer: dev)
        try expectConsistent(root)
    }

    @Test(
        "GroupRange, MaxGroupsPerApp and MaxGroupsPerSigner are read from appd.conf; overlapping ranges are refused"
    )
    func parse() throws {
        let config = try AppdConfiguration.parse(
            "[Users]\nUIDRange=50000-50009\nGroupRange=60000-60099\nMaxGroupsPerApp=3\nMaxGroupsPerSigner=40\n",
            file: "t.conf")
        #expect(config.groupRange == 60000...60099)
        #expect(config.maxGroupsPerApp == 3 && config.maxGroupsPerSigner == 40)
        let defaults = AppdConfiguration()
        #expect(!defaults.uidRange.overlaps(defaults.groupRange))
        #expect(defaults.groupRange.upperBound < 1 << 31)
        #expect(
            throws: AppdError.self,
            performing: {
                _ = try AppdConfiguration.parse(
                    "[Users]\nUIDRange=50000-50009\nGroupRange=50005-60000\n", file: "t.conf")
            })
        let overlap = failure {
            _ = try AppdConfiguration.parse(
                "[Users]\nGroupRange=2000099000-2000100000\n", file: "t.conf")
        }
        #expect(
            overlap?.message
                == "t.conf: [Users] GroupRange=2000099000-2000100000 overlaps UIDRange=2000000000-2000099999"
        )
        #expect(
            failure {
                _ = try AppdConfiguration.parse("[Users]\nMaxGroupsPerApp=0\n", file: "t.conf")
            }?.message
                == "t.conf:2: [Users] MaxGroupsPerApp=0 is not a positive whole number")
    }
}
