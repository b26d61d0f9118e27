import Foundation
import Sandbox
import TestSupport
import Testing

@testable import AppContainers
@testable import AppdConfig

/// What `appd override` does to the admin's file: one section rewritten, everything else kept.
@Suite("appd.conf editing")
struct ConfigEditingTests {
    static let file = """
        # appd.conf of this host
        [Sandbox]
        MemoryMax=256M

        # notes gets more memory
        [App com.example.Notes]
        # reviewed in ticket 42
          MemoryMax=1G
        RevokeEntitlements=com.apple.security.device.camera

        # the vendor
        [Signer vendor]
        Key=ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=
        """ + "\n"

    @Test(
        "a key keeps its place, spelling and indent; comments in the section stay; new keys follow the last key; other lines are byte for byte"
    )
    func replacesInPlace() {
        let edited = AppdConfiguration.replacingApp(
            "com.example.notes",
            with: [
                ("MemoryMax", "2G"), ("CPUWeight", "50"),
                ("RevokeEntitlements", "com.apple.security.device.camera"),
            ],
            in: Self.file)
        #expect(
            edited == """
                # appd.conf of this host
                [Sandbox]
                MemoryMax=256M

                # notes gets more memory
                [App com.example.Notes]
                # reviewed in ticket 42
                  MemoryMax=2G
                RevokeEntitlements=com.apple.security.device.camera
                CPUWeight=50

                # the vendor
                [Signer vendor]
                Key=ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=
                """ + "\n")
    }

    @Test(
        "a key not asked for goes; an empty list removes the header and keys, not the next section's comment"
    )
    func removes() {
        let dropped = AppdConfiguration.replacingApp(
            "com.example.notes", with: [("MemoryMax", "1G")], in: Self.file)
        #expect(!dropped.contains("RevokeEntitlements") && dropped.contains("  MemoryMax=1G\n"))
        let reset = AppdConfiguration.replacingApp("com.example.notes", with: [], in: Self.file)
        #expect(
            reset == """
                # appd.conf of this host
                [Sandbox]
                MemoryMax=256M

                # notes gets more memory

                # the vendor
                [Signer vendor]
                Key=ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=
                """ + "\n")
        #expect(
            AppdConfiguration.replacingApp("com.example.absent", with: [], in: Self.file)
                == Self.file)
    }

    @Test("a missing section is appended after a blank line; an empty file gets just the section")
    func appends() throws {
        let added = AppdConfiguration.replacingApp(
            "com.example.new", with: [("TasksMax", "64")], in: Self.file)
        #expect(added == Self.file + "\n[App com.example.new]\nTasksMax=64\n")
        #expect(
            try AppdConfiguration.parse(added, file: "t").override(for: "com.example.new")?
                .sandboxValue("TasksMax") == "64")
        #expect(
            AppdConfiguration.replacingApp("com.example.new", with: [("TasksMax", "64")], in: "")
                == "[App com.example.new]\nTasksMax=64\n")
    }

    @Test("an [App] section written for every key reads back as the same override")
    func roundTrip() throws {
        var override = AppOverride()
        for (key, value) in [
            ("MemoryMax", "64M"), ("TasksMax", "40"), ("OpenFilesMax", "128"), ("DataQuota", "2G"),
            ("CPUWeight", "50"), ("BackgroundModes", ""),
            ("RevokeEntitlements", "com.apple.security.network.*"),
        ] {
            #expect(throws: Never.self, "\(key)") { try override.set(key: key, value: value) }
        }
        let text = AppdConfiguration.replacingApp(
            "com.example.x", with: override.lines, in: Self.file)
        let read = try AppdConfiguration.parse(text, file: "t").override(for: "com.example.x")
        #expect(read == override)
        #expect(read?.narrowedBackgroundModes(["audio", "voip"]) == [])
        #expect(
            read?.cgroupLimits(settings: SandboxSettings())
                == CgroupLimits(memoryMax: 64 << 20, pidsMax: 40, cpuWeight: 50))
        #expect(
            try AppdConfiguration.parse(text, file: "t").dataQuota(for: "com.example.x") == 2 << 30)
    }

    @Test(
        "written atomically: the new text, the old mode and owner, through a symlink to its target, no temporary left"
    )
    func atomicWrite() throws {
        let directory = try makeTemporaryDirectory("/tmp/appd-edit.XXXXXX")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let target = "\(directory)/real.conf"
        try "old\n".write(toFile: target, atomically: false, encoding: .utf8)
        chmod(target, 0o640)
        symlink(target, "\(directory)/appd.conf")
        try AppdConfiguration.writeAtomically("new\n", to: "\(directory)/appd.conf")
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "new\n")
        var info = stat()
        #expect(lstat("\(directory)/appd.conf", &info) == 0 && info.st_mode & S_IFMT == S_IFLNK)
        #expect(stat(target, &info) == 0 && info.st_mode & 0o777 == 0o640)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == [
                "appd.conf", "real.conf",
            ])
    }
}
