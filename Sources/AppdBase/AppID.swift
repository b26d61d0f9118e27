/// An app's id: its bundle id (`CFBundleIdentifier`), the name every route, metric, denial and
/// registry row knows the app by. Bundle ids are ASCII (letters, digits, `-` and `.`, checked at
/// install) and their case does not matter, as on iOS and in the registry (SQLite's `NOCASE`,
/// which folds ASCII only): two ids are the same app when they are equal with ASCII letters
/// folded to lower case. Only ASCII folds: `lowercased()` would also map, say, the Kelvin sign
/// U+212A to `k`, so a name the registry never matches would match here. It keeps the spelling
/// it was made with (what the registry holds, what a client typed) for printing, and is that
/// string on the wire.
public struct AppID: Hashable, Comparable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    /// As written: the registry's spelling, or the caller's.
    public let spelling: String
    /// The canonical form: ASCII letters folded to lower case. Equality, hashing and order.
    public let key: String

    public init(_ spelling: String) {
        self.spelling = spelling
        key = Self.folded(spelling)
    }

    public init(stringLiteral value: String) { self.init(value) }

    /// `text` with ASCII A–Z folded to a–z and every other byte as it is.
    public static func folded(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) else { return text }
        return String(
            decoding: text.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// Whether `other` names this app (case aside).
    public func matches(_ other: String) -> Bool { key == Self.folded(other) }

    public static func == (left: AppID, right: AppID) -> Bool { left.key == right.key }
    public func hash(into hasher: inout Hasher) { hasher.combine(key) }
    public static func < (left: AppID, right: AppID) -> Bool { left.key < right.key }
    public var description: String { spelling }

    public init(from decoder: any Decoder) throws {
        self.init(try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(spelling)
    }
}
