import Foundation
import Testing

@testable import AppRuntime

/// A bundle in either layout with an English, German and Austrian-German localization.
struct SampleBundle {
    let scratch = Scratch()
    let url: URL
    /// Where resources go: the root (flat) or Contents/Resources.
    let resources: String

    init(layout: Resources.Layout, developmentRegion: String = "en") throws {
        url = scratch.url.appendingPathComponent("Notes.app")
        resources = layout == .flat ? "Notes.app" : "Notes.app/Contents/Resources"
        let info = try PropertyListSerialization.data(
            fromPropertyList: [
                "CFBundleIdentifier": "com.example.notes", "CFBundleExecutable": "Notes",
                "CFBundleDevelopmentRegion": developmentRegion,
            ], format: .xml, options: 0)
        try scratch.write(
            layout == .flat ? "Notes.app/Info.plist" : "Notes.app/Contents/Info.plist", info)
        try write("shared.txt", "shared")
        try write(
            "en.lproj/Localizable.strings",
            """
            /* The title */
            "title" = "Notes";
            "count" = "%d notes";
            "only.english" = "English only";
            // a line comment
            bare = word;
            "escaped" = "tab\\there \\"quoted\\" \\U00e9";
            """)
        // UTF-16 with a BOM, as Xcode wrote strings files for years.
        var german = Data([0xFF, 0xFE])
        german.append(
            "\"title\" = \"Notizen\";\n\"count\" = \"%d Notizen\";\n\"umlaut\" = \"Grüße\";\n".data(
                using: .utf16LittleEndian)!)
        try write("de.lproj/Localizable.strings", german)
        try write("de-AT.lproj/Localizable.strings", "\"title\" = \"Notizerl\";")
        try write("de.lproj/picture.png", "de")
        try write("en.lproj/picture.png", "en")
        try write(
            "en.lproj/Menu.strings",
            try PropertyListSerialization.data(
                fromPropertyList: ["open": "Open"], format: .binary, options: 0))
        try write(
            "de.lproj/Menu.strings",
            try PropertyListSerialization.data(
                fromPropertyList: ["open": "Öffnen"], format: .xml, options: 0))
    }

    func write(_ relative: String, _ text: String) throws { try write(relative, Data(text.utf8)) }
    func write(_ relative: String, _ data: Data) throws {
        try scratch.write("\(resources)/\(relative)", data)
    }

    func open(_ environment: [String: String]) throws -> Resources {
        try Resources(bundleURL: url, environment: environment)
    }
}

@Suite("resources and localization")
struct ResourcesTests {
    @Test(
        "lookup and localization work the same in the flat and the Contents/ layout",
        arguments: [Resources.Layout.flat, .contents])
    func bothLayouts(layout: Resources.Layout) throws {
        let bundle = try SampleBundle(layout: layout)
        let resources = try bundle.open(["LANG": "de_DE.UTF-8"])
        #expect(resources.layout == layout)
        #expect(resources.bundleIdentifier == "com.example.notes")
        #expect(
            resources.path(forResource: "shared", ofType: "txt")
                == bundle.scratch.url.appendingPathComponent("\(bundle.resources)/shared.txt").path)
        let picture = try #require(resources.url(forResource: "picture", withExtension: "png"))
        #expect(try String(contentsOf: picture, encoding: .utf8) == "de")
        #expect(
            resources.url(forResource: "picture", withExtension: "png", localization: "en") != nil)
        #expect(resources.path(forResource: "missing", ofType: "txt") == nil)
        #expect(
            resources.path(forResource: "de", ofType: "lproj") == nil, "folders are not resources")
        #expect(resources.localizedString(forKey: "title") == "Notizen")
        #expect(resources.localizedString(forKey: "umlaut") == "Grüße")
        #expect(resources.localizedString(forKey: "open", table: "Menu") == "Öffnen")
    }

    @Test(
        "language from LANGUAGE, LC_ALL, LC_MESSAGES, LANG: de_AT.UTF-8@euro → de-AT, de, then the development region"
    )
    func languageOrder() throws {
        let bundle = try SampleBundle(layout: .flat)
        let austrian = try bundle.open(["LANG": "de_AT.UTF-8@euro"])
        #expect(austrian.localizations == ["de-AT", "de", "en"])
        #expect(austrian.localizedString(forKey: "title") == "Notizerl")
        #expect(
            austrian.localizedString(forKey: "count") == "%d Notizen",
            "a key de-AT lacks comes from de")
        #expect(
            austrian.localizedString(forKey: "only.english") == "English only",
            "then from the development region")
        #expect(
            try bundle.open(["LANGUAGE": "fr:de", "LANG": "en_US.UTF-8"]).localizations.first
                == "de")
        #expect(
            try bundle.open(["LC_ALL": "de_DE.UTF-8", "LANG": "fr_FR.UTF-8"]).localizations.first
                == "de")
        #expect(
            try bundle.open(["LC_MESSAGES": "de_DE", "LANG": "fr_FR.UTF-8"]).localizations.first
                == "de")
        #expect(try bundle.open(["LANG": "C.UTF-8"]).localizations == ["en"])
        #expect(try bundle.open([:]).localizedString(forKey: "title") == "Notes")
        #expect(
            try bundle.open(["LANG": "ja_JP.UTF-8"]).localizedString(forKey: "title") == "Notes")
    }

    @Test("the development region comes before Base and en when no user language matches")
    func developmentRegion() throws {
        let bundle = try SampleBundle(layout: .contents, developmentRegion: "German")
        try bundle.write("Base.lproj/Localizable.strings", "\"base.only\" = \"from Base\";")
        let resources = try bundle.open(["LANG": "ja_JP.UTF-8"])
        #expect(resources.localizations == ["de", "Base", "en"])
        #expect(resources.localizedString(forKey: "title") == "Notizen")
        #expect(resources.localizedString(forKey: "base.only") == "from Base")
    }

    @Test("a missing key gives the value, else the key; escapes, comments and bare words parse")
    func missingAndSyntax() throws {
        let bundle = try SampleBundle(layout: .flat)  // kept: tables are read when first used
        let resources = try bundle.open(["LANG": "en_GB.UTF-8"])
        #expect(resources.localizedString(forKey: "nope", value: "fallback") == "fallback")
        #expect(resources.localizedString(forKey: "nope", value: "") == "nope")
        #expect(resources.localizedString(forKey: "nope", table: "NoSuchTable") == "nope")
        #expect(resources.localizedString(forKey: "bare") == "word")
        #expect(resources.localizedString(forKey: "escaped") == "tab\there \"quoted\" é")
        #expect(resources.localizedString(forKey: "open", table: "Menu") == "Open")
    }

    @Test("strings files: UTF-16 big-endian, `\"key\";` form, and errors that name the line")
    func stringsParser() throws {
        var bigEndian = Data([0xFE, 0xFF])
        bigEndian.append("\"a\" = \"ä\";\n\"self\";".data(using: .utf16BigEndian)!)
        #expect(try StringsFile.parse(bigEndian, name: "x") == ["a": "ä", "self": "self"])
        #expect {
            try StringsFile.parse(Data("\"a\" = \"b\";\n\"c\" = \"d\"\n".utf8), name: "T.strings")
        } throws: { "\($0)" == "T.strings, line 3: expected ';' at the end" }
        #expect(throws: AppRuntimeError.self) {
            try StringsFile.parse(Data("\"open".utf8), name: "x")
        }
        #expect(throws: AppRuntimeError.self) {
            try StringsFile.parse(Data([0xC3, 0x28]), name: "x")
        }
    }

    @Test("a folder without Info.plist is not a bundle")
    func notABundle() throws {
        let scratch = Scratch()
        #expect(throws: AppRuntimeError.self) {
            try Resources(bundleURL: scratch.url, languages: [])
        }
    }

    @Test("locale names become language tags and their shorter forms")
    func tags() {
        #expect(
            Localization.preferredLanguages(environment: ["LANGUAGE": "zh_Hans_CN:pt_BR"])
                == ["zh-Hans-CN", "zh-Hans", "zh", "pt-BR", "pt"])
        #expect(Localization.tag(fromLocale: "POSIX") == nil)
        #expect(Localization.tag(fromLocale: "sr_RS@latin") == "sr-RS")
    }
}

@Suite("AppContainer")
struct ContainerTests {
    @Test("paths come from the environment, never hard-coded")
    func fromEnvironment() throws {
        let bundle = try SampleBundle(layout: .flat)
        let container = try AppContainer(environment: [
            "HOME": "/data/ABC", "CFFIXED_USER_HOME": "/data/XYZ", "TMPDIR": "/data/XYZ/tmp/",
            "APPD_BUNDLE_PATH": bundle.url.path, "APPD_BUNDLE_ID": "com.example.renamed",
        ])
        #expect(container.home.path == "/data/XYZ")
        #expect(container.documents.path == "/data/XYZ/Documents")
        #expect(container.preferences.path == "/data/XYZ/Library/Preferences")
        #expect(container.caches.path == "/data/XYZ/Library/Caches")
        #expect(container.tmp.path == "/data/XYZ/tmp")
        #expect(container.bundleURL.path == bundle.url.path)
        #expect(container.bundleIdentifier == "com.example.renamed")
    }

    @Test(
        "without APPD_BUNDLE_*, the bundle around the executable, in either layout, and its Info.plist id"
    )
    func fromExecutable() throws {
        for layout in [Resources.Layout.flat, .contents] {
            let bundle = try SampleBundle(layout: layout)
            let executable = layout == .flat ? "Notes.app/Notes" : "Notes.app/Contents/MacOS/Notes"
            let container = try AppContainer(
                environment: ["HOME": "/data/H"],
                executablePath: bundle.scratch.url.appendingPathComponent(executable).path)
            #expect(container.bundleURL.path == bundle.url.path)
            #expect(container.bundleIdentifier == "com.example.notes")
            #expect(container.tmp.path == "/data/H/tmp")
        }
    }

    @Test("a missing or unusable environment is a clear error")
    func missing() throws {
        let bundle = try SampleBundle(layout: .flat)
        #expect {
            try AppContainer(environment: ["APPD_BUNDLE_PATH": bundle.url.path])
        } throws: {
            ($0 as? AppRuntimeError)?.code == .missingEnvironment && "\($0)".contains("HOME")
        }
        #expect {
            try AppContainer(environment: [
                "HOME": "relative/home", "APPD_BUNDLE_PATH": bundle.url.path,
            ])
        } throws: {
            ($0 as? AppRuntimeError)?.code == .invalidEnvironment
                && "\($0)".contains("relative/home")
        }
        #expect {
            try AppContainer(environment: ["HOME": "/h"], executablePath: "/usr/bin/true")
        } throws: {
            "\($0)".contains("APPD_BUNDLE_PATH is not set") && "\($0)".contains("/usr/bin/true")
        }
        let noID = Scratch()
        try noID.write("X.app/Info.plist", "<plist version=\"1.0\"><dict/></plist>")
        #expect {
            try AppContainer(environment: [
                "HOME": "/h", "APPD_BUNDLE_PATH": noID.url.appendingPathComponent("X.app").path,
            ])
        } throws: { "\($0)".contains("APPD_BUNDLE_ID is not set") }
    }
}
