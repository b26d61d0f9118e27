import Foundation
import PrintableText
import Testing

@testable import AppBundle

/// Issue 24 §2: the one rule for printing what someone else chose, and the Info.plist strings
/// refused at install for holding what it would escape.
@Suite("the one rule for text someone else chose")
struct PrintableTests {
    @Test(
        "C0, DEL, C1 and the bidi controls are shown as \\u{..}; other text, tabs of it included, only so"
    )
    func rule() {
        let cases: [(String, String)] = [
            ("\u{1B}[2J", "\\u{1b}[2J"), ("a\u{7F}b", "a\\u{7f}b"), ("\u{9B}8m", "\\u{9b}8m"),
            ("\u{9D}0;t\u{07}", "\\u{9d}0;t\\u{7}"), ("\u{202E}txt.exe", "\\u{202e}txt.exe"),
            (
                "\u{2066}\u{2069}\u{200E}\u{200F}\u{061C}\u{202A}",
                "\\u{2066}\\u{2069}\\u{200e}\\u{200f}\\u{61c}\\u{202a}"
            ),
            ("line\nnext\ttab", "line\\u{a}next\\u{9}tab"),
            ("Notes — naïve 日本語 \u{A0}é", "Notes — naïve 日本語 \u{A0}é"),
        ]
        for (text, shown) in cases {
            #expect(text.printable == shown, "\(text.debugDescription)")
            #expect(Printable.firstControl(in: shown) == nil)
        }
        // Every scalar below U+00A0 but the printable ASCII ones, and only those, is escaped.
        for value in UInt32(0)..<0xA0 {
            let scalar = Unicode.Scalar(value)!
            #expect(Printable.isControl(scalar) == !(0x20..<0x7F).contains(value), "U+\(value)")
        }
        #expect(Printable.codePoint("\u{1B}") == "U+001B")
        #expect(Printable.codePoint("\u{202E}") == "U+202E")
    }

    @Test(
        "a message quotes at most 200 scalars; bytes are cut before they are decoded, whatever their length"
    )
    func limits() {
        let long = String(repeating: "é", count: 250)
        #expect(String(describing: Printable(long)) == String(repeating: "é", count: 200) + "…")
        #expect(
            String(describing: Printable(bytes: Array(long.utf8), limit: 10)) == String(
                repeating: "é", count: 10) + "…")
        #expect(
            String(describing: Printable(bytes: [0x61, 0xC2, 0x9B, 0xFF])) == "a\\u{9b}\u{FFFD}")
        #expect(Printable(long, limit: nil).description == long)
    }

    @Test(
        "Info.plist strings with a control or bidi character are refused, naming the key and the code point"
    )
    func infoPlistControls() throws {
        for (key, value, point) in [
            ("CFBundleName", "\u{1B}[2J\u{1B}[HNotes", "U+001B"),
            ("CFBundleDisplayName", "Notes\u{1B}]52;c;cm0gLXJmIH4=\u{07}", "U+001B"),
            ("CFBundleShortVersionString", "1.0\u{9B}8m", "U+009B"),
            ("CFBundleName", "\u{202E}txt.exe", "U+202E"),
            ("CFBundleDisplayName", "a\nb", "U+000A"),
            ("CFBundleExecutable", "Hel\u{9D}lo", "U+009D"),
        ] {
            var info = validInfo
            info[key] = value
            // Binary: XML cannot hold every control character, a binary plist can.
            let scratch = Scratch()
            let bundle = try makeBundle(
                scratch.sub("Evil.app"), infoData: plist(info, format: .binary))
            let found = problems(bundle)
            let expected =
                "Info.plist: \(key) '\(value.printable)' holds the control character \(point)"
            #expect(
                found.contains { $0.contains(expected) }, "no problem says \(expected): \(found)")
            #expect(found.allSatisfy { Printable.firstControl(in: $0) == nil }, "\(found)")
        }
        var info = validInfo
        info["CFBundleDisplayName"] = "Notes — naïve"
        info["CFBundleShortVersionString"] = "1.0 (β)"
        let scratch = Scratch()
        try makeBundle(scratch.sub("Hello.app"), info: info)
        #expect(problems(scratch.sub("Hello.app")).isEmpty)
    }
}
