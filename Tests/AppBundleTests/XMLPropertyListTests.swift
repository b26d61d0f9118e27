import Foundation
import Testing

@testable import AppBundle

/// The XML plist reader that spares bundles Foundation's: what it reads must be exactly what
/// Foundation reads, and whatever it does not read it must leave to Foundation (nil), never
/// read differently.
@Suite("XML property lists read without Foundation")
struct XMLPropertyListTests {
    /// Foundation's reading, as PropertyListReader converted it before this reader existed.
    static func foundation(_ text: String) -> [String: PlistValue]? {
        foundation(Data(text.utf8))
    }

    static func foundation(_ data: Data) -> [String: PlistValue]? {
        guard
            let object = try? PropertyListSerialization.propertyList(from: data, format: nil),
            let dict = object as? [String: Any]
        else { return nil }
        return try? dict.mapValues(PlistValue.init(foundation:))
    }

    static func plist(_ body: String) -> String {
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0">
        \(body)
        </plist>

        """
    }

    @Test(
        "every real Info.plist and entitlements file reads as Foundation reads it, or is left to it"
    )
    func realFixtures() throws {
        var read = 0
        var total = 0
        for kind in ["info", "entitlements"] {
            for name in FixtureTests.files(kind) {
                let data = try Data(
                    contentsOf: URL(fileURLWithPath: "\(FixtureTests.root)/\(kind)/\(name)"))
                total += 1
                guard let fast = XMLPropertyList.dictionary(Array(data)) else { continue }
                read += 1
                #expect(fast == Self.foundation(data), "\(kind)/\(name)")
            }
        }
        // Most are in the plain forms (the others use reals, dates or a binary plist).
        #expect(total >= 20 && read * 2 >= total, "read \(read) of \(total)")
    }

    @Test("the forms bundles are written in: every value type, entities, comments, empty elements")
    func plainForms() {
        let text = Self.plist(
            """
            <dict>
            \t<!-- a comment -->
            \t<key>files2</key>
            \t<dict>
            \t\t<key>Info.plist</key>
            \t\t<dict><key>hash2</key><data>
            \t\tj7kGyM7X7wX0WGAelBKhiRZ/M04Kt0JScpTxbdW1GYQ=
            \t\t</data></dict>
            \t</dict>
            \t<key>name &amp; &lt;tag&gt; &quot;q&quot; &apos;a&apos; &#233;&#x263A;</key><string>Caf\u{e9} \t tab</string>
            \t<key>empty</key><string/>
            \t<key>none</key><string></string>
            \t<key></key><integer>-9223372036854775808</integer>
            \t<key>big</key><integer>9223372036854775807</integer>
            \t<key>zero</key><integer>0</integer>
            \t<key>yes</key><true/>
            \t<key>no</key><false/>
            \t<key>list</key><array><string>a</string><array/><dict/><integer>7</integer></array>
            \t<key>blob</key><data></data>
            </dict>
            """)
        let fast = XMLPropertyList.dictionary(Array(text.utf8))
        #expect(fast != nil)
        #expect(fast == Self.foundation(text))
        #expect(fast?["name & <tag> \"q\" 'a' \u{e9}\u{263A}"] == .string("Caf\u{e9} \t tab"))
        #expect(fast?[""] == .integer(Int64.min))
        #expect(fast?["list"] == .array([.string("a"), .array([]), .dictionary([:]), .integer(7)]))
    }

    @Test(
        "left to Foundation: forms this reader does not take, and malformed text",
        arguments: [
            "<dict><key>r</key><real>1.5</real></dict>",
            "<dict><key>d</key><date>2024-01-01T00:00:00Z</date></dict>",
            "<dict><key>c</key><string><![CDATA[x]]></string></dict>",
            "<dict><key>cr</key><string>a\r\nb</string></dict>",
            "<dict><key>a</key><string id=\"1\">x</string></dict>",
            "<dict><key>k</key><string>1</string><key>k</key><string>2</string></dict>",
            "<dict><key>\u{e9}</key><true/><key>e\u{301}</key><false/></dict>",
            "<dict><key>p</key><integer>+1</integer></dict>",
            "<dict><key>h</key><integer>0x10</integer></dict>",
            "<dict><key>o</key><integer>9223372036854775808</integer></dict>",
            "<dict><key>u</key><unknown/></dict>",
            "<dict>stray<key>k</key><true/></dict>",
            "<dict><key>k</key></dict>",
            "<dict><string>no key</string></dict>",
            "<array><string>root is an array</string></array>",
            "<dict><key>n</key><string>&#0;</string></dict>",
            "<dict><key>e</key><string>&nbsp;</string></dict>",
            "<dict><key>b</key><data>not base64!</data></dict>",
            "<dict><key>t</key><true>yes</true></dict>",
        ])
    func leftToFoundation(body: String) {
        let text = Self.plist(body)
        #expect(XMLPropertyList.dictionary(Array(text.utf8)) == nil, "\(body)")
        // And the reader as a whole still reads it as Foundation does (or refuses it).
        let whole = try? PropertyListReader.dictionary(from: Data(text.utf8), maxBytes: 1 << 20)
        if let whole { #expect(whole == Self.foundation(text), "\(body)") }
    }

    @Test("another encoding, trailing text, or no <plist> root: left to Foundation")
    func documentShape() {
        for text in [
            Self.plist("<dict/>").replacingOccurrences(of: "UTF-8", with: "ISO-8859-1"),
            Self.plist("<dict/>") + "<dict/>",
            "<dict><key>a</key><true/></dict>",
            Self.plist("<dict/>").replacingOccurrences(
                of: "<plist version=\"1.0\">", with: "<plist/>"),
        ] {
            #expect(XMLPropertyList.dictionary(Array(text.utf8)) == nil, "\(text)")
        }
        #expect(XMLPropertyList.dictionary(Array(Self.plist("<dict/>").utf8)) == [:])
    }

    @Test("nesting 200,000 deep, or past 64: no recursion, left to Foundation's limits")
    func deepNesting() {
        let deep = Self.plist(
            "<dict><key>a</key>" + String(repeating: "<array>", count: 200_000)
                + String(repeating: "</array>", count: 200_000) + "</dict>")
        #expect(XMLPropertyList.dictionary(Array(deep.utf8)) == nil)
        // The root dictionary is one frame: maxDepth - 1 arrays in it reach the limit.
        func nested(_ count: Int) -> [UInt8] {
            Array(
                Self.plist(
                    "<dict><key>a</key>" + String(repeating: "<array>", count: count)
                        + String(repeating: "</array>", count: count) + "</dict>"
                ).utf8)
        }
        #expect(XMLPropertyList.dictionary(nested(XMLPropertyList.maxDepth - 1)) != nil)
        #expect(XMLPropertyList.dictionary(nested(XMLPropertyList.maxDepth)) == nil)
    }

    @Test("a large plist: 50,000 keys, each an array")
    func manyItems() {
        let items = (0..<50_000).map { "<key>k\($0)</key><array><integer>\($0)</integer></array>" }
        let text = Self.plist("<dict>" + items.joined() + "</dict>")
        let fast = XMLPropertyList.dictionary(Array(text.utf8))
        #expect(fast?.count == 50_000)
        #expect(fast?["k49999"] == .array([.integer(49_999)]))
    }
}
