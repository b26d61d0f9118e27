import AppdBase
import Foundation
import Testing

@testable import AppContainers
@testable import AppdConfig

@Suite("appd.conf")
struct ConfigurationTests {
    static var shippedConfig: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("config/appd.conf").path
    }

    @Test("the shipped config/appd.conf parses and documents exactly the built-in defaults")
    func shippedDefaults() throws {
        let text = try String(contentsOfFile: Self.shippedConfig, encoding: .utf8)
        #expect(try AppdConfiguration.parse(text, file: "appd.conf") == AppdConfiguration())
        // Uncommenting every documented key must give the defaults too: the comments are true.
        let uncommented = text.split(separator: "\n", omittingEmptySubsequences: false)
            .map {
                $0.hasPrefix("#") && $0.contains("=") && !$0.contains(" ")
                    ? String($0.dropFirst()) : String($0)
            }
            .joined(separator: "\n")
        #expect(uncommented != text)
        #expect(try AppdConfiguration.parse(uncommented, file: "appd.conf") == AppdConfiguration())
    }

    @Test("values are read, with size suffixes")
    func values() throws {
        let config = try AppdConfiguration.parse(
            "[Bundle]\nMaxFiles=10\nMaxTotalBytes=300M\nMaxInfoPlistBytes = 64K\n[Users]\nUIDRange=50000-50009\n",
            file: "t.conf")
        #expect(config.bundleLimits.maxFiles == 10)
        #expect(config.bundleLimits.maxTotalBytes == 300 << 20)
        #expect(config.bundleLimits.maxInfoPlistBytes == 64 << 10)
        #expect(config.uidRange == 50000...50009)
    }

    @Test("[Lifecycle] values: policy, seconds, modes, sizes; empty MemoryBudget is no budget")
    func lifecycleValues() throws {
        let config = try AppdConfiguration.parse(
            "[Lifecycle]\nActivePolicy=all\nBackgroundGracePeriod=1.5s\nBackgroundTaskMaxTime=60\n"
                + "AllowedBackgroundModes=voip fetch\nMemoryBudget=2G\nActiveMemoryLimit=\nExpiredBackgroundTask=suspend\n",
            file: "t.conf")
        #expect(config.lifecycle.activePolicy == .all)
        #expect(config.lifecycle.backgroundGracePeriod == 1.5)
        #expect(config.lifecycle.allowedBackgroundModes == ["voip", "fetch"])
        #expect(config.lifecycle.memoryBudget == 2 << 30)
        #expect(config.lifecycle.activeMemoryLimit == nil)
        #expect(config.lifecycle.expiredTaskAction == .suspend)
        // A task gets what it asks for, never more than the maximum.
        #expect(config.lifecycle.taskTime(requested: nil) == 30)
        #expect(config.lifecycle.taskTime(requested: 3600) == 60)
    }

    @Test(
        "mistakes are errors naming file, line and key",
        arguments: [
            ("[Bundle]\nMaxFile=10\n", "t.conf:2: unknown key MaxFile in [Bundle]"),
            ("[Bundel]\n", "t.conf:1: unknown section [Bundel]"),
            ("MaxFiles=10\n", "t.conf:1: 'MaxFiles' is outside any [Section]"),
            (
                "[Bundle]\nMaxFiles=-3\n",
                "t.conf:2: [Bundle] MaxFiles=-3 is not a positive whole number"
            ),
            (
                "[Bundle]\nMaxTotalBytes=lots\n",
                "t.conf:2: [Bundle] MaxTotalBytes=lots is not a size"
            ),
            ("[Users]\nUIDRange=9-5\n", "t.conf:2: [Users] UIDRange=9-5 is not a range"),
            (
                "[Users]\nUIDRange=0-5000\n",
                "UIDRange starts at 0; ids below 1000 belong to the system"
            ),
            ("[Bundle]\njunk\n", "t.conf:2: expected Key=Value"),
            (
                "[Lifecycle]\nActivePolicy=some\n",
                "t.conf:2: [Lifecycle] ActivePolicy=some is not single or all"
            ),
            (
                "[Lifecycle]\nAllowedBackgroundModes=audio music\n",
                "is not a space-separated list of audio, location"
            ),
            ("[Lifecycle]\nMemoryPressureCritical=120\n", "is not a percentage"),
            ("[Lifecycle]\nGracePeriod=5\n", "t.conf:2: unknown key GracePeriod in [Lifecycle]"),
        ])
    func mistakes(text: String, message: String) {
        #expect {
            try AppdConfiguration.parse(text, file: "t.conf")
        } throws: { error in
            (error as? AppdError)?.code == .invalidConfig && "\(error)".contains(message)
        }
    }

    @Test("a missing default file means defaults; a missing named file is an error")
    func missingFile() throws {
        #expect(
            try AppdConfiguration.load(path: "/nonexistent/appd.conf", explicit: false)
                == AppdConfiguration())
        #expect(throws: AppdError.self) {
            try AppdConfiguration.load(path: "/nonexistent/appd.conf", explicit: true)
        }
    }
}

@Suite("uid allocation")
struct UIDAllocatorTests {
    @Test("takes the lowest free uid, skipping taken ones and subordinate ranges")
    func skips() throws {
        let etc = Scratch("appd-etc")
        try "alice:3000000000:10\n".write(
            toFile: etc.sub("subuid"), atomically: true, encoding: .utf8)
        try "bob:3000000012:2\n".write(toFile: etc.sub("subgid"), atomically: true, encoding: .utf8)
        let allocator = UIDAllocator(range: 3_000_000_000...3_000_000_020, etc: etc.path)
        #expect(try allocator.allocate(excluding: [], exhausted: Self.full) == 3_000_000_010)
        #expect(
            try allocator.allocate(excluding: [3_000_000_010, 3_000_000_011], exhausted: Self.full)
                == 3_000_000_014)
    }

    @Test("skips uids the host uses for accounts")
    func skipsAccounts() throws {
        // Debian's system accounts fill 0-13 and more; this range starts in the middle of them.
        let allocator = UIDAllocator(range: 0...1000, etc: "/nonexistent")
        let uid = try allocator.allocate(excluding: [], exhausted: Self.full)
        #expect(uid > 0 && getpwuid(uid) == nil && getgrgid(uid) == nil)
    }

    static let full = AppdError(.conflict, "full")

    @Test(
        "a full range throws the caller's error (GroupLimitTests/exhaustedCounts: what it counts)")
    func exhausted() {
        let allocator = UIDAllocator(range: 3_000_000_000...3_000_000_001, etc: "/nonexistent")
        #expect {
            try allocator.allocate(excluding: [3_000_000_000, 3_000_000_001], exhausted: Self.full)
        } throws: { ($0 as? AppdError) == Self.full }
    }
}
