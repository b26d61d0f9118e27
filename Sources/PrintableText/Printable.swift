/// The one rule for printing text that someone else chose (an app's name, an entitlement, a path
/// an app made, a name in an archive): every scalar a terminal would act on instead of show is
/// written as `\u{..}`.
///
/// A terminal acts on C0 controls (ESC starts the sequences that clear the screen, hide text
/// with SGR 8, set the title or write the clipboard with OSC 52), DEL, and C1 controls (U+009B is
/// CSI and U+009D OSC on terminals that read 8-bit controls); bidi controls (U+202E and the rest)
/// reorder what is shown around them, so `exe.txt` can be shown as `txt.exe`. Newline and tab are
/// escaped too: a value is shown on its own line, and one of its own could fake the next.
///
/// `--json` output is exact and never goes through this; `appctl logs` is the app's own bytes
/// (docs/app-output.md).
public struct Printable: CustomStringConvertible, Sendable {
    /// How much of a quoted value a message shows, in scalars, before `…`.
    public static let messageLimit = 200

    public let text: String
    public let limit: Int?

    /// `limit` nil shows all of `text`, for output whose values are bounded already (a path,
    /// an installed app's name); messages quote at most `messageLimit` scalars.
    public init(_ text: String, limit: Int? = Printable.messageLimit) {
        self.text = text
        self.limit = limit
    }

    /// Bytes that should be UTF-8 (a tar entry's name, a path the kernel reported); what is
    /// not is shown as U+FFFD.
    public init(bytes: some Collection<UInt8>, limit: Int? = Printable.messageLimit) {
        // A scalar is at most 4 bytes: past (limit + 1) × 4 of them the cut is certain, and
        // decoding stops there whatever the length of `bytes`.
        let decoded = limit.map { bytes.prefix(($0 + 1) * 4) }.map {
            String(decoding: $0, as: UTF8.self)
        }
        self.init(decoded ?? String(decoding: bytes, as: UTF8.self), limit: limit)
    }

    public var description: String {
        var out = ""
        var shown = 0
        for scalar in text.unicodeScalars {
            if let limit, shown == limit { return out + "…" }
            if Self.isControl(scalar) {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
            shown += 1
        }
        return out
    }

    /// A scalar a terminal acts on rather than shows: C0, DEL, C1, and the bidi controls
    /// (LRM, RLM, ALM, the embeddings and overrides U+202A-U+202E, the isolates U+2066-U+2069).
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0..<0x20, 0x7F..<0xA0: true
        case 0x200E, 0x200F, 0x061C, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// The first scalar of `text` that `isControl`, if any: what a validator names when it
    /// refuses.
    public static func firstControl(in text: String) -> Unicode.Scalar? {
        text.unicodeScalars.first(where: isControl)
    }

    /// `U+009B`: how a refusal names a code point.
    public static func codePoint(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}

extension String {
    /// All of the string with `Printable`'s rule applied: for text output of a value someone
    /// else chose.
    public var printable: String { Printable(self, limit: nil).description }
}
