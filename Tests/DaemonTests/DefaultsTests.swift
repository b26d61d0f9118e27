import AppdAPI
import AppdClient
import Foundation
import Glibc
import Testing

/// `appd defaults` (docs/lifecycle.md, "Preferences") against a real daemon and the Notes sample, whose
/// AppRuntime reads its preferences: written while it runs, and a preferences file the app
/// made hostile.
@Suite("appd defaults under appd", .serialized, rootOnly)
struct DefaultsTests {
    static let file = "Library/Preferences/com.example.notes.plist"

    @Test("a value written while Notes runs reaches it (defaultsDidChange), typed, as its uid")
    func writeWhileRunning() throws {
        let daemon = try TestDaemon(config: lifecycleConfig())
        try daemon.installSample("Notes")
        let notes = try daemon.launch("com.example.notes", [])
        #expect(
            try daemon.eventually { try daemon.logs(notes.id).contains("notes: greeting none") })

        let written = try daemon.run(
            "appd", ["defaults", "com.example.notes", "write", "greeting", "hello there"])
        #expect(written.code == 0, "\(written.output)")
        #expect(written.output.contains("told \(notes.id)"), "\(written.output)")
        #expect(
            try daemon.eventually {
                try daemon.logs(notes.id).contains("notes: defaults changed: greeting hello there")
            })

        let typed = try daemon.run(
            "appd", ["defaults", "com.example.notes", "write", "volume", "7", "--type", "int"])
        #expect(typed.code == 0, "\(typed.output)")
        let domain = try daemon.client.get(
            "/v1/apps/com.example.notes/defaults", as: APIDefaults.self)
        #expect(domain.values["volume"] == .integer(7))
        #expect(domain.values["greeting"] == .string("hello there"))
        // The app's own key is still there: a write changes only what it names.
        #expect(domain.values["launches"] == .integer(1))
        let read = try daemon.run("appd", ["defaults", "com.example.notes", "read", "greeting"])
        #expect(read.output == "hello there\n", "\(read.output)")

        // The file is the app's, as if it had written it itself.
        var st = stat()
        let path = "\(try daemon.dataContainer("com.example.notes"))/\(Self.file)"
        #expect(lstat(path, &st) == 0)
        #expect(st.st_uid == notes.uid && st.st_mode & 0o777 == 0o600)

        let deleted = try daemon.run(
            "appd", ["defaults", "com.example.notes", "delete", "greeting"])
        #expect(deleted.code == 0, "\(deleted.output)")
        #expect(
            try daemon.eventually {
                try daemon.logs(notes.id).contains("notes: defaults changed: greeting none")
            })
        _ = try daemon.killAndWait(notes.id)
    }

    @Test("a preferences file that is a link, huge or garbage is refused cleanly, never followed")
    func hostileFile() throws {
        let daemon = try TestDaemon(config: lifecycleConfig())
        try daemon.installSample("Notes")
        let preferences = "\(try daemon.dataContainer("com.example.notes"))/Library/Preferences"
        let path = "\(preferences)/com.example.notes.plist"
        let secret = "\(daemon.directory)/secret.plist"
        try Data(
            #"<?xml version="1.0"?><plist version="1.0"><dict><key>s</key><string>root only</string></dict></plist>"#
                .utf8
        ).write(to: URL(fileURLWithPath: secret))
        chmod(secret, 0o600)

        func refused(_ arguments: [String], _ words: String) throws {
            let result = try daemon.run("appd", ["defaults", "com.example.notes"] + arguments)
            #expect(result.code != 0, "\(arguments) succeeded: \(result.output)")
            #expect(result.output.contains(words), "\(arguments): \(result.output)")
            #expect(!result.output.contains("root only"))
        }
        // A link to a file the app may not read: neither read nor replaced through it.
        #expect(symlink(secret, path) == 0)
        try refused(["read"], "symbolic link")
        try refused(["write", "k", "v"], "symbolic link")
        #expect(try String(contentsOfFile: secret, encoding: .utf8).contains("root only"))
        unlink(path)
        // Garbage, and a file over the limit: errors that name the file, nothing changed.
        try Data([0x62, 0x70, 0x6c, 0x69, 0x73, 0x74, 0xff, 0x00, 0x13]).write(
            to: URL(fileURLWithPath: path))
        try refused(["read"], "com.example.notes.plist is a malformed binary property list")
        try refused(["write", "k", "v"], "malformed")
        try Data(repeating: 0x20, count: 2 << 20).write(to: URL(fileURLWithPath: path))
        try refused(["read"], "over the limit")
        // Import replaces what cannot be read.
        let good = "\(daemon.directory)/good.plist"
        try Data(
            #"<?xml version="1.0"?><plist version="1.0"><dict><key>n</key><integer>3</integer></dict></plist>"#
                .utf8
        ).write(to: URL(fileURLWithPath: good))
        let imported = try daemon.run("appd", ["defaults", "com.example.notes", "import", good])
        #expect(imported.code == 0, "\(imported.output)")
        let read = try daemon.run("appd", ["defaults", "com.example.notes", "read", "n"])
        #expect(read.output == "3\n", "\(read.output)")
        // The folder itself swapped for a link: refused.
        try FileManager.default.removeItem(atPath: preferences)
        #expect(symlink(daemon.directory, preferences) == 0)
        try refused(["read"], "without following a link")
        try refused(["import", good], "without following a link")
        #expect(
            !FileManager.default.fileExists(atPath: "\(daemon.directory)/com.example.notes.plist"))
    }
}
