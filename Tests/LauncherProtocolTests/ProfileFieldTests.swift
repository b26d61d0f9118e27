import LauncherProtocol
import TestSupport
import Testing

/// The profile's field encoding (docs/launcher-protocol.md): what the daemon writes with
/// `ProfileField.encode` is what appd-exec reads with `ProfileField.decode`.
@Suite("profile field encoding")
struct ProfileFieldTests {
    /// The bytes a field may not hold raw: they would split it or end its line.
    static func isRawForbidden(_ byte: UInt8) -> Bool { byte <= 0x20 || byte == 0x7F }

    @Test("a field of any text without NUL comes back as it was, and never holds a separator")
    func roundTrip() throws {
        var generator = SeededGenerator(seed: 26)
        // Every ASCII byte but NUL, plus multi-byte scalars (é, €, an emoji, a bidi override).
        let alphabet: [Unicode.Scalar] =
            (1...0x7F).compactMap(Unicode.Scalar.init)
            + ["\u{E9}", "\u{20AC}", "\u{1F600}", "\u{202E}"]
        for _ in 0..<2000 {
            let length = Int.random(in: 0...40, using: &generator)
            var text = String.UnicodeScalarView()
            for _ in 0..<length { text.append(alphabet.randomElement(using: &generator) ?? "a") }
            let field = String(text)
            let encoded = ProfileField.encode(field)
            #expect(!encoded.utf8.contains(where: Self.isRawForbidden), "\(encoded)")
            #expect(try ProfileField.decode(ArraySlice(encoded.utf8)) == field)
        }
    }

    @Test("every byte the encoder must escape is written as upper-case %XX")
    func escapes() {
        #expect(ProfileField.encode("a b") == "a%20b")
        #expect(ProfileField.encode("100%") == "100%25")
        #expect(ProfileField.encode("line\nnext\t\u{7F}") == "line%0Anext%09%7F")
        #expect(ProfileField.encode("/usr/lib") == "/usr/lib")
    }

    @Test(
        "the decoder refuses what the encoder never writes, naming the problem",
        arguments: [
            ("a b", "byte 0x20 must be encoded"),
            ("a\nb", "byte 0xa must be encoded"),
            ("a\u{7F}", "byte 0x7f must be encoded"),
            ("%2", "bad percent escape"),
            ("%zz", "bad percent escape"),
            ("%0a", "bad percent escape"),
            ("a%00b", "NUL byte in a field"),
            ("%FF%FE", "field is not UTF-8"),
        ])
    func refusals(field: String, message: String) {
        #expect(throws: ProfileFieldError(message)) {
            try ProfileField.decode(ArraySlice(field.utf8))
        }
    }

    @Test("a record is its kind and its encoded fields, one space apart")
    func record() {
        #expect(
            ProfileField.record(.mount, ["ro-bind", "/a b", "/c"]) == "mount ro-bind /a%20b /c")
        #expect(ProfileField.record(.loopback, []) == "loopback")
    }
}
