import Foundation
import Testing

@testable import AppBundle

/// Duplicate keys are found in the XML itself (not through libxml2), however the second one
/// is written; what is not a duplicate is not reported as one.
@Suite("duplicate plist keys")
struct PlistKeyScannerTests {
    static func scan(
        _ body: String,
        doctype: String =
            #"<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">"#
    )
        -> PlistKeyScanner.Outcome
    {
        PlistKeyScanner.scan(
            Array(
                #"<?xml version="1.0" encoding="UTF-8"?>\#n\#(doctype)\#n<plist version="1.0">\#(body)</plist>"#
                    .utf8))
    }

    @Test(
        "a duplicate written plainly, through entities, character references, CDATA or split by a comment"
    )
    func duplicatesFound() {
        let cases: [(String, String)] = [
            ("<dict><key>a</key><true/><key>a</key><false/></dict>", "a"),
            ("<dict><key>a&amp;b</key><true/><key>a&#38;b</key><false/></dict>", "a&b"),
            ("<dict><key>x</key><true/><key>&#x78;</key><false/></dict>", "x"),
            ("<dict><key>ab</key><true/><key><![CDATA[ab]]></key><false/></dict>", "ab"),
            ("<dict><key>ab</key><true/><key>a<!-- hidden -->b</key><false/></dict>", "ab"),
            ("<dict><key>k</key><dict><key>z</key><true/></dict><key>k</key><false/></dict>", "k"),
            ("<dict><key/><true/><key></key><false/></dict>", ""),
            ("<dict><key>é</key><true/><key>&#xE9;</key><false/></dict>", "é"),
        ]
        for (body, key) in cases {
            #expect(Self.scan(body) == .duplicate(key), "\(body)")
        }
    }

    @Test(
        "the same key in different dictionaries, keys that differ, and look-alikes outside keys are fine"
    )
    func notDuplicates() {
        let cases = [
            "<dict><key>a</key><dict><key>a</key><true/></dict></dict>",
            "<dict><key>a</key><dict/><key>b</key><dict></dict></dict>",
            "<dict><key>a</key><string>a</string><key>A</key><string>&lt;key&gt;a&lt;/key&gt;</string></dict>",
            "<dict><key>a </key><true/><key>a</key><true/></dict>",
            "<dict><!-- <key>a</key> --><key>a</key><true/><key>b</key><string><![CDATA[<key>a</key>]]></string></dict>",
            "<array><dict><key>a</key><true/></dict><dict><key>a</key><true/></dict></array>",
        ]
        for body in cases {
            #expect(Self.scan(body) == .noDuplicate, "\(body)")
        }
    }

    @Test("a DOCTYPE with an internal subset, and unknown entities in keys, are refused")
    func refused() {
        if case .refused = Self.scan(
            "<dict><key>a</key><true/></dict>",
            doctype: "<!DOCTYPE plist [ <!ATTLIST plist x CDATA #IMPLIED> ]>")
        {
        } else {
            Issue.record("internal subset accepted")
        }
        if case .refused = Self.scan("<dict><key>&nbsp;</key><true/></dict>") {
        } else {
            Issue.record("unknown entity accepted")
        }
    }

    @Test("every real plist of the fixtures: no duplicate")
    func fixtures() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent("Fixtures/real-plists")
        var seen = 0
        for folder in ["info", "entitlements"] {
            let dir = root.appendingPathComponent(folder)
            for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) {
                let data = try Data(contentsOf: dir.appendingPathComponent(name))
                guard !data.starts(with: Array("bplist".utf8)) else { continue }
                seen += 1
                #expect(PlistKeyScanner.scan(Array(data)) == .noDuplicate, "\(folder)/\(name)")
            }
        }
        #expect(seen > 10)
    }
}
