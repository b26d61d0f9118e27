import AppdBase
import Foundation
import Sandbox
import Testing

@testable import AppContainers
@testable import AppdConfig

/// `appd override`'s edit of one `[App ID]` section, as a library: no CLI, no daemon.
@Suite("editing an [App ID] section")
struct OverrideEditTests {
    @Test("values set and reset, entitlements denied and allowed again, in the order given")
    func applies() throws {
        var old = AppOverride()
        try old.set(key: "CPUWeight", value: "50")
        old.revokedEntitlements = ["com.apple.security.network.server"]
        var edit = AppOverrideEdit()
        edit.values = [
            ("MemoryMax", "--memory-max", "128M"), ("CPUWeight", "--cpu-weight", "default"),
            ("BackgroundModes", "--no-background", ""),
        ]
        edit.deny = ["com.apple.security.device.*"]
        edit.allow = ["com.apple.security.network.server", "com.apple.security.cs.allow-jit"]
        let (new, warnings) = try edit.applied(to: old)
        #expect(
            new.lines.map { "\($0.key)=\($0.value)" } == [
                "MemoryMax=128M", "BackgroundModes=",
                "RevokeEntitlements=com.apple.security.device.*",
            ])
        #expect(
            warnings == [
                "com.apple.security.cs.allow-jit was not denied: --allow only removes a --deny, it never grants what the signer did not"
            ])
        #expect(
            AppOverride.changes(from: old, to: new) == [
                "MemoryMax=128M", "CPUWeight removed (was 50; the host's value applies)",
                "BackgroundModes=(none)",
                "RevokeEntitlements=com.apple.security.device.* (was com.apple.security.network.server)",
            ])
    }

    @Test("a bad value names the option; allowing what a pattern denies is refused; reset empties")
    func refuses() throws {
        var edit = AppOverrideEdit()
        edit.values = [("MemoryMax", "--memory-max", "1K")]
        #expect(throws: AppdError.self) {
            try edit.applied(to: AppOverride())
        }
        do {
            _ = try edit.applied(to: AppOverride())
        } catch let error as AppdError {
            #expect(error.code == .invalidConfig)
            #expect(error.message.hasPrefix("--memory-max 1K is not "))
        }
        var denied = AppOverride()
        denied.revokedEntitlements = ["com.apple.security.device.*"]
        var allow = AppOverrideEdit()
        allow.allow = ["com.apple.security.device.camera"]
        #expect(throws: AppdError.self) { try allow.applied(to: denied) }
        var bad = AppOverrideEdit()
        bad.deny = ["com.*.x"]
        #expect(throws: AppdError.self) {
            try bad.applied(to: AppOverride())
        }
        var reset = AppOverrideEdit()
        reset.reset = true
        #expect(try reset.applied(to: denied).override == AppOverride())
    }

    @Test(
        "the written file reads back as the section asked for; a file with an error is left alone")
    func writes() throws {
        let scratch = Scratch()
        let path = scratch.sub("appd.conf")
        try "# mine\n[Sandbox]\nMemoryMax=256M\n".write(
            toFile: path, atomically: true, encoding: .utf8)
        let (text, config) = try AppdConfiguration.readForEditing(path, explicit: true)
        var new = AppOverride()
        try new.set(key: "TasksMax", value: "64")
        try AppdConfiguration.writeOverride(
            "com.example.Notes", new, text: text, config: config, path: path)
        let written = try String(contentsOfFile: path, encoding: .utf8)
        #expect(
            written == "# mine\n[Sandbox]\nMemoryMax=256M\n\n[App com.example.Notes]\nTasksMax=64\n"
        )
        #expect(
            try AppdConfiguration.parse(written, file: path).override(for: "com.example.notes")
                == new)

        try "[Sandbox]\nNoSuchKey=1\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: AppdError.self) {
            try AppdConfiguration.readForEditing(path, explicit: true)
        }
        #expect(throws: AppdError.self) {
            try AppdConfiguration.readForEditing(scratch.sub("missing.conf"), explicit: true)
        }
        #expect(
            try AppdConfiguration.readForEditing(scratch.sub("missing.conf"), explicit: false).text
                == "")
    }
}
