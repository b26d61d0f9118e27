import AppdBase
import PrintableText

/// A `CFBundleIdentifier`: reverse-DNS, ASCII letters, digits, `-` and `.`, at least two labels,
/// none empty, at most 155 bytes (Apple's limit).
///
/// Identifiers are compared as written here; the registry treats two that differ only by case as
/// the same app, as Apple's platforms do.
public struct BundleIdentifier: Sendable, Hashable, Codable, CustomStringConvertible {
    public static let maxLength = 155

    public let rawValue: String

    /// Throws a message that says what is wrong with `text`, without naming the key.
    public init(validating text: String) throws(AppdError) {
        func refuse(_ why: String) -> AppdError {
            AppdError(
                .invalidBundle, "'\(Printable(text))' is not a valid bundle identifier: \(why)")
        }
        guard !text.isEmpty else { throw refuse("it is empty") }
        guard text.utf8.count <= Self.maxLength else {
            throw refuse("it is \(text.utf8.count) bytes long, the limit is \(Self.maxLength)")
        }
        if let bad = text.unicodeScalars.first(where: { !Self.allowed($0) }) {
            throw refuse(
                "'\(Printable(String(bad)))' is not allowed (only ASCII letters, digits, '-' and '.')"
            )
        }
        let labels = text.split(separator: ".", omittingEmptySubsequences: false)
        guard !labels.contains(where: \.isEmpty) else { throw refuse("it has an empty label") }
        guard labels.count >= 2 else {
            throw refuse("it needs at least two dot-separated labels, like com.example.app")
        }
        rawValue = text
    }

    public init(from decoder: Decoder) throws {
        try self.init(validating: try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }

    private static func allowed(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "a"..."z", "A"..."Z", "0"..."9", "-", ".": true
        default: false
        }
    }
}

/// A `CFBundleVersion`: one to four dot-separated non-negative integers (`42`, `1.2`, `1.2.3`),
/// compared component by component as numbers, a missing component counting as 0, so
/// `1.10 > 1.9` and `1.0 == 1`.
public struct BundleVersion: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    public let rawValue: String
    public let components: [UInt64]

    public init(validating text: String) throws(AppdError) {
        func refuse(_ why: String) -> AppdError {
            AppdError(.invalidBundle, "'\(Printable(text))' is not a valid bundle version: \(why)")
        }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard !text.isEmpty, parts.count <= 4 else {
            throw refuse("use one to four dot-separated numbers, like 42 or 1.2.3")
        }
        var components: [UInt64] = []
        for part in parts {
            guard !part.isEmpty, part.count <= 18, part.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
                let number = UInt64(part)
            else { throw refuse("use one to four dot-separated numbers, like 42 or 1.2.3") }
            components.append(number)
        }
        rawValue = text
        self.components = components
    }

    public init(from decoder: Decoder) throws {
        try self.init(validating: try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }

    /// Components padded with zeros to four, so equal versions hash alike.
    private var padded: [UInt64] { components + Array(repeating: 0, count: 4 - components.count) }

    public static func == (a: Self, b: Self) -> Bool { a.padded == b.padded }
    public func hash(into hasher: inout Hasher) { hasher.combine(padded) }
    public static func < (a: Self, b: Self) -> Bool {
        a.padded.lexicographicallyPrecedes(b.padded)
    }
}
