import AppBundle
import AppdAPI
import AppdClient
import Foundation
import Testing

/// Issue 24 §2: a bundle from the narrowest signer made `appd verify` clear the admin's screen,
/// hide its real entitlements (SGR 8) and write the clipboard (OSC 52), and an app's file names
/// reached `appctl denials`/`events` with C1 controls and U+202E. Info.plist strings with a
/// control or bidi character are refused, naming the key and the code point; everything else an
/// app chose is printed by the one rule (`Printable`, `\u{..}`); `--json` stays exact.
@Suite(
    "text an app, a bundle or a signer chose never reaches a terminal as a control", .serialized,
    rootOnly)
struct TerminalInjectionTests {
    /// ESC sequences (clear the screen and home, SGR 8, OSC 52 writing the clipboard), C1 CSI
    /// and OSC, and the right-to-left override.
    static let clear = "\u{1B}[2J\u{1B}[H"
    static let conceal = "\u{1B}[8m"
    static let clipboard = "\u{1B}]52;c;cm0gLXJmIH4=\u{07}"
    static let c1 = "\u{9B}2J\u{9D}0;title\u{07}"
    static let override = "\u{202E}"

    /// A signer that may sign one bundle id and only `com.evil.*` entitlements: the narrowest
    /// an admin would trust, and enough to reach every screen that prints a bundle.
    static func narrowSigner() throws -> (directory: String, config: String) {
        let directory = try makeTemporaryDirectory("/var/tmp/appd-narrow-signer.XXXXXX")
        try TestDaemon.tool(["keygen", "--out", directory, "--name", "narrow"])
        return (
            directory,
            "\n[Signer narrow]\nKey=\(directory)/narrow.public-key\nBundleIDs=com.example.evil\nEntitlements=com.evil.*\n"
        )
    }

    /// `Probe.app` as com.example.evil with these Info.plist keys and entitlements, both
    /// written as binary plists (which hold any string), signed by the narrow signer.
    static func hostileBundle(
        _ daemon: TestDaemon, signer: String, info: [String: String], entitlements: [String: String]
    ) throws -> String {
        let bundle = try daemon.makeProbe("com.example.evil")
        let write = try TestDaemon.run(
            "/usr/bin/python3",
            [
                "-c",
                """
                import json, plistlib, sys
                bundle, info, entitlements = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
                plist = {"CFBundleIdentifier": "com.example.evil", "CFBundleExecutable": "Probe",
                         "CFBundleName": "Probe", "CFBundleVersion": "1", "CFBundlePackageType": "APPL"}
                plist.update(info)
                with open(bundle + "/Info.plist", "wb") as out:
                    plistlib.dump(plist, out, fmt=plistlib.FMT_BINARY)
                granted = {"com.apple.security.app-sandbox": True}
                granted.update(entitlements)
                with open(bundle + "/Entitlements.plist", "wb") as out:
                    plistlib.dump(granted, out, fmt=plistlib.FMT_BINARY)
                """,
                bundle, try Self.json(info), try Self.json(entitlements),
            ])
        #expect(write.code == 0, "\(write.output)")
        try signAsItsOwnTool(bundle, key: "\(signer)/narrow.signing-key")
        return bundle
    }

    /// Signs as a signer's own tool would: `appd sign` refuses a bundle whose Info.plist it
    /// would refuse, but the format is public (CodeResources over the tree, Ed25519 over it),
    /// so the signature is made here from the manifest alone.
    static func signAsItsOwnTool(_ bundle: String, key: String) throws {
        let (manifest, problems) = try BundleManifest.read(
            bundleAt: bundle, layout: .ios, limits: BundleLimits())
        #expect(problems.isEmpty, "\(problems)")
        let (resources, signature) = try CodeSignature.sign(
            manifest, with: try SigningIdentity.load(path: key))
        let layout = BundleLayout.ios
        try FileManager.default.createDirectory(
            atPath: "\(bundle)/\(layout.signatureDirectory)", withIntermediateDirectories: true)
        try resources.write(to: URL(fileURLWithPath: "\(bundle)/\(layout.codeResourcesPath)"))
        try signature.write(to: URL(fileURLWithPath: "\(bundle)/\(layout.signaturePath)"))
    }

    static func json(_ value: [String: String]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: value), as: UTF8.self)
    }

    /// Fails naming each scalar a terminal would act on: C0 but newline and tab, DEL, C1, and
    /// the bidi controls.
    static func expectPrintable(
        _ text: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let controls = text.unicodeScalars.filter { scalar in
            switch scalar.value {
            case 0x0A, 0x09: false
            case 0..<0x20, 0x7F..<0xA0: true
            case 0x200E, 0x200F, 0x061C, 0x202A...0x202E, 0x2066...0x2069: true
            default: false
            }
        }
        #expect(
            controls.isEmpty,
            "\(what) printed \(controls.map { "U+" + String($0.value, radix: 16) }): \(text.debugDescription)",
            sourceLocation: sourceLocation)
    }

    @Test(
        "Info.plist names and versions holding ESC, C1 or U+202E: appd verify and both installs refuse, naming the key and the code point, in printable text"
    )
    func infoPlistRefused() throws {
        let (signer, config) = try Self.narrowSigner()
        defer { try? FileManager.default.removeItem(atPath: signer) }
        let daemon = try TestDaemon(config: config)
        let bundle = try Self.hostileBundle(
            daemon, signer: signer,
            info: [
                "CFBundleName": Self.clear + "Notes" + Self.conceal,
                "CFBundleDisplayName": "Notes" + Self.clipboard,
                "CFBundleShortVersionString": "1.0" + Self.c1 + Self.override,
            ],
            entitlements: [:])
        // appd sign refuses it too, naming the same keys.
        let sign = try daemon.run(
            "appd", ["sign", "--key", "\(signer)/narrow.signing-key", bundle])
        #expect(sign.code != 0 && sign.output.contains("CFBundleName"), "\(sign.output)")
        Self.expectPrintable(sign.output, "appd sign")
        let expected = [
            "CFBundleName '\\u{1b}[2J", "holds the control character U+001B",
            "CFBundleDisplayName 'Notes\\u{1b}]52;c;", "CFBundleShortVersionString '1.0\\u{9b}2J",
            "holds the control character U+009B",
        ]
        for (label, arguments) in [
            ("appd verify", ["verify", bundle]), ("appd install", ["install", bundle]),
            ("appd install --no-daemon", ["install", "--no-daemon", bundle]),
        ] {
            let result = try daemon.run("appd", arguments)
            print("\(label): \(result.output.debugDescription)")
            #expect(result.code != 0, "\(label) accepted it: \(result.output)")
            for part in expected {
                #expect(
                    result.output.contains(part), "\(label) does not say \(part): \(result.output)")
            }
            Self.expectPrintable(result.output, label)
        }
        #expect(try daemon.client.get("/v1/apps", as: [APIApp].self).isEmpty)
        try daemon.expectStillWorks("info-plist")
    }

    @Test(
        "entitlement keys and values holding ESC, OSC 52, SGR 8, C1 and U+202E: verify, install, appctl list and info print them escaped; --json keeps them exact"
    )
    func entitlementsEscaped() throws {
        let (signer, config) = try Self.narrowSigner()
        defer { try? FileManager.default.removeItem(atPath: signer) }
        let daemon = try TestDaemon(config: config)
        let hostile = [
            "com.evil.screen" + Self.clear: "fake report" + Self.conceal,
            "com.evil.clipboard": Self.clipboard,
            "com.evil.c1" + Self.c1: Self.override + "txt.exe",
        ]
        let bundle = try Self.hostileBundle(
            daemon, signer: signer, info: [:], entitlements: hostile)
        var outputs: [(String, (code: Int32, output: String))] = []
        outputs.append(
            (
                "appd verify",
                try daemon.run("appd", ["verify", "--config", daemon.configPath, bundle])
            ))
        outputs.append(("appd install", try daemon.run("appd", ["install", bundle])))
        outputs.append(("appctl list", try daemon.run("appctl", ["list"])))
        outputs.append(("appctl info", try daemon.run("appctl", ["info", "com.example.evil"])))
        outputs.append(("appd info", try daemon.run("appd", ["info", "com.example.evil"])))
        for (label, result) in outputs {
            print("\(label): \(result.output.debugDescription)")
            #expect(result.code == 0, "\(label): \(result.output)")
            Self.expectPrintable(result.output, label)
        }
        for (label, result) in outputs where label != "appctl list" {
            for part in [
                "com.evil.screen\\u{1b}[2J\\u{1b}[H", "fake report\\u{1b}[8m",
                "\\u{1b}]52;c;cm0gLXJmIH4=\\u{7}", "com.evil.c1\\u{9b}2J\\u{9d}0;title\\u{7}",
                "\\u{202e}txt.exe",
            ] {
                #expect(
                    result.output.contains(part), "\(label) does not show \(part): \(result.output)"
                )
            }
        }
        #expect(
            outputs.first { $0.0 == "appctl list" }?.1.output.contains("com.example.evil") == true)
        // --json is exact: the keys and values as the bundle wrote them.
        let json = try daemon.run("appctl", ["info", "--json", "com.example.evil"])
        let app = try APICoding.decoder().decode(APIApp.self, from: Data(json.output.utf8))
        let requested = app.entitlements?.requested ?? []
        for (key, value) in hostile {
            #expect(
                requested.first { $0.key == key }?.value == .string(value),
                "\(key.debugDescription) in \(requested.map(\.key))")
        }
        try daemon.expectStillWorks("entitlements")
    }

    @Test(
        "a sandboxed app denied executing a file it named with ESC, C1 and U+202E: appctl denials and appctl events print the path escaped"
    )
    func denialPathEscaped() throws {
        // The file lies in a read-only exception path the admin allows: what an app writes is
        // mounted noexec, and that refusal leaves no record; Landlock's refusal of executing from
        // a read-only path does. The app names the file; the bytes of its name are the attack.
        let shared = try makeTemporaryDirectory("/var/tmp/appd-hostile-name.XXXXXX")
        defer { try? FileManager.default.removeItem(atPath: shared) }
        chmod(shared, 0o755)
        let file = shared + "/run\u{1b}[2J\u{9b}8m\u{9d}\u{202e}exe.txt"
        try "#!/bin/sh\nexit 0\n".write(toFile: file, atomically: false, encoding: .utf8)
        chmod(file, 0o755)
        let daemon = try TestDaemon(config: "[Sandbox]\nAllowedReadOnlyPaths=\(shared)\n")
        try daemon.installProbe(
            "com.example.hostile-name",
            entitlements:
                "<key>com.apple.security.temporary-exception.files.absolute-path.read-only</key><array><string>\(shared)</string></array>"
        )
        let events = try DrainedChild(
            builtExecutable("appctl"), arguments: ["events", "--since", "0"],
            environment: ["APPD_ROOT=\(daemon.root)"])
        let probe = try daemon.launch("com.example.hostile-name", ["exec-hostile-name", shared])
        #expect(
            try daemon.eventually {
                try daemon.logs(probe.id).contains("exec-hostile-name: refused")
            })
        let escaped = "run\\u{1b}[2J\\u{9b}8m\\u{9d}\\u{202e}exe.txt"
        #expect(
            try daemon.eventually {
                try daemon.run("appctl", ["denials", probe.id]).output.contains(escaped)
            })
        let denials = try daemon.run("appctl", ["denials", probe.id])
        print("appctl denials: \(denials.output.debugDescription)")
        #expect(denials.output.contains("fs.execute"), "\(denials.output)")
        #expect(denials.output.contains(escaped), "\(denials.output)")
        Self.expectPrintable(denials.output, "appctl denials")

        let streamed = String(
            decoding: events.stop { String(decoding: $0, as: UTF8.self).contains("exe.txt") },
            as: UTF8.self)
        print("appctl events: \(streamed.debugDescription)")
        #expect(streamed.contains("denial") && streamed.contains(escaped), "\(streamed)")
        Self.expectPrintable(streamed, "appctl events")
        try daemon.expectStillWorks("denial-path")
    }
}
