import Foundation
import Testing

@testable import AppRuntime

@Suite("Preferences")
struct PreferencesTests {
    let scratch = Scratch()
    var folder: URL { scratch.url.appendingPathComponent("Library/Preferences") }

    func open(_ arguments: [String] = []) throws -> Preferences {
        try Preferences(folder: folder, bundleIdentifier: "com.example.notes", arguments: arguments)
    }

    @Test(
        "arguments, then application, then global, then registration: the first domain that has the key wins"
    )
    func domainOrder() throws {
        let setup = try open()
        try setup.setPersistentDomain(
            ["k": "global", "g": "global", "r2": "global"], forName: Preferences.globalDomain)
        let prefs = try open(["-k", "argument", "--verbose", "-n", "7"])
        prefs.register(defaults: [
            "k": "registration", "g": "registration", "r": "registration", "a": "registration",
        ])
        prefs.set("application", forKey: "k")
        prefs.set("application", forKey: "a")
        #expect(prefs.string(forKey: "k") == "argument")
        #expect(prefs.string(forKey: "a") == "application")
        #expect(prefs.string(forKey: "g") == "global")
        #expect(prefs.string(forKey: "r") == "registration")
        #expect(prefs.string(forKey: "missing") == nil)
        #expect(prefs.integer(forKey: "n") == 7)
        #expect(prefs.object(forKey: "-verbose") == nil, "--long options are not defaults")
        prefs.removeObject(forKey: "a")
        #expect(prefs.string(forKey: "a") == "registration")
        let all = prefs.dictionaryRepresentation()
        #expect(all["k"] as? String == "argument" && all["g"] as? String == "global")
        #expect(
            FileManager.default.fileExists(
                atPath: folder.appendingPathComponent(".GlobalPreferences.plist").path))
    }

    @Test("what one instance sets, a new instance (the app relaunched) reads")
    func relaunch() throws {
        do {
            let first = try open()
            first.set("hello", forKey: "s")
            first.set(42, forKey: "i")
            first.set(2.5, forKey: "d")
            first.set(true, forKey: "b")
            first.set(Data([1, 2, 3]), forKey: "data")
            first.set(["a", "b"], forKey: "array")
            first.set(["x": 1, "nested": ["y": "z"]] as [String: Any], forKey: "dict")
            first.set(URL(fileURLWithPath: "/tmp/some file"), forKey: "file")
            first.set(URL(string: "https://example.com/a?b=1"), forKey: "web")
        }
        let second = try open()
        #expect(second.string(forKey: "s") == "hello")
        #expect(second.integer(forKey: "i") == 42)
        #expect(second.double(forKey: "d") == 2.5)
        #expect(second.bool(forKey: "b"))
        #expect(!second.bool(forKey: "s"))
        #expect(second.data(forKey: "data") == Data([1, 2, 3]))
        #expect(second.stringArray(forKey: "array") == ["a", "b"])
        #expect(second.array(forKey: "array")?.count == 2)
        let dict = try #require(second.dictionary(forKey: "dict"))
        #expect((dict["nested"] as? [String: Any])?["y"] as? String == "z")
        #expect(second.url(forKey: "file")?.path == "/tmp/some file")
        #expect(second.url(forKey: "web")?.absoluteString == "https://example.com/a?b=1")
        #expect(second.integer(forKey: "b") == 1)
        #expect(second.string(forKey: "i") == "42")
    }

    @Test("the file is a binary plist at Library/Preferences/<bundle-id>.plist, mode 0600")
    func binaryOnDisk() throws {
        let prefs = try open()
        prefs.set(1, forKey: "x")
        let file = folder.appendingPathComponent("com.example.notes.plist")
        #expect(prefs.applicationURL == file)
        let data = try Data(contentsOf: file)
        #expect(data.starts(with: Array("bplist00".utf8)))
        var format = PropertyListSerialization.PropertyListFormat.xml
        let decoded =
            try PropertyListSerialization.propertyList(from: data, format: &format)
            as? [String: Any]
        #expect(format == .binary)
        #expect(decoded?["x"] as? Int == 1)
        let mode =
            try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test("saves are atomic: a new file replaces the old by rename, no temporary is left behind")
    func atomicSave() throws {
        let prefs = try open()
        prefs.set("one", forKey: "k")
        let file = folder.appendingPathComponent("com.example.notes.plist")
        let before =
            try FileManager.default.attributesOfItem(atPath: file.path)[.systemFileNumber] as? Int
        prefs.set("two", forKey: "k")
        let after =
            try FileManager.default.attributesOfItem(atPath: file.path)[.systemFileNumber] as? Int
        #expect(before != nil && before != after, "the file was rewritten in place, not replaced")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == [
                "com.example.notes.plist"
            ])
    }

    @Test("a failed save keeps the value in memory; synchronize() saves it once it can")
    func failedSave() throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let prefs = try open()
        // A directory where the file goes makes the rename fail (even as root).
        let file = folder.appendingPathComponent("com.example.notes.plist")
        try FileManager.default.createDirectory(
            at: file.appendingPathComponent("blocker"), withIntermediateDirectories: true)
        prefs.set("kept", forKey: "k")
        #expect(prefs.string(forKey: "k") == "kept")
        #expect(!prefs.synchronize())
        try FileManager.default.removeItem(at: file)
        #expect(prefs.synchronize())
        #expect(try open().string(forKey: "k") == "kept")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: folder.path) == [
                "com.example.notes.plist"
            ])
    }

    @Test("synchronize() picks up what another process wrote; a damaged file reads as empty")
    func externalChanges() throws {
        let prefs = try open()
        prefs.set("mine", forKey: "k")
        try open().set("theirs", forKey: "k")
        #expect(prefs.string(forKey: "k") == "mine")
        #expect(prefs.synchronize())
        #expect(prefs.string(forKey: "k") == "theirs")
        try Data("garbage that is not a plist".utf8).write(
            to: folder.appendingPathComponent("com.example.notes.plist"))
        #expect(try open().object(forKey: "k") == nil)
    }

    @Test("arguments domain: YES/NO, numbers, and OpenStep arrays and dictionaries")
    func argumentValues() throws {
        let prefs = try open([
            "-Flag", "YES", "-Off", "NO", "-Rate", "0.25", "-List", "(a, b, \"c d\")",
            "-Map", "{x = 1;}", "-Name", "plain text", "-Dangling",
        ])
        #expect(prefs.bool(forKey: "Flag"))
        #expect(!prefs.bool(forKey: "Off"))
        #expect(prefs.double(forKey: "Rate") == 0.25)
        #expect(prefs.stringArray(forKey: "List") == ["a", "b", "c d"])
        #expect(prefs.dictionary(forKey: "Map")?["x"] as? String == "1")
        #expect(prefs.string(forKey: "Name") == "plain text")
        #expect(prefs.object(forKey: "Dangling") == nil)
        prefs.set("saved", forKey: "Name")
        #expect(prefs.string(forKey: "Name") == "plain text", "the arguments domain still wins")
        #expect(try open().string(forKey: "Name") == "saved")
    }

    @Test("values a plist cannot hold are refused; bad bundle ids and unknown domains are errors")
    func refusals() throws {
        let prefs = try open()
        prefs.set(NSObject(), forKey: "obj")
        prefs.set(["ok", NSObject()] as [Any], forKey: "mixed")
        #expect(prefs.object(forKey: "obj") == nil && prefs.object(forKey: "mixed") == nil)
        #expect(throws: AppRuntimeError.self) {
            try Preferences(folder: folder, bundleIdentifier: "../escape")
        }
        #expect(throws: AppRuntimeError.self) {
            try prefs.setPersistentDomain([:], forName: "com.example.other")
        }
    }
}

@Suite("the language domain")
struct LanguageDomainTests {
    @Test("AppleLanguages and AppleLocale come from the locale appd gives the app")
    func fromLocale() {
        let values = LanguageDomain.values(["LANG": "de_DE.UTF-8"])
        #expect(values["AppleLanguages"] as? [String] == ["de-DE", "de"])
        #expect(values["AppleLocale"] as? String == "de_DE")
        #expect(LanguageDomain.values(["LANG": "C.UTF-8"]).isEmpty)
        let listed = LanguageDomain.values(["LANGUAGE": "fr:en", "LANG": "fr_CA.UTF-8@x"])
        #expect(listed["AppleLanguages"] as? [String] == ["fr", "en"])
        #expect(listed["AppleLocale"] as? String == "fr_CA")
    }
}
