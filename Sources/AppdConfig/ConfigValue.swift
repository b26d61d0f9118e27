/// How one key's text becomes its typed value: each kind of value appd.conf has (a yes/no, a
/// number of seconds, a size, a list of patterns, ...) is read here once, and every key of that
/// kind uses the same reader, so `yes` means the same and `5s` is read the same in every section.
public struct ConfigValue<Value>: Sendable {
    let read: @Sendable (String) throws(ConfigProblem) -> Value

    init(reading read: @escaping @Sendable (String) throws(ConfigProblem) -> Value) {
        self.read = read
    }

    /// A value that is either well formed or not `expected` (the words after "is not" in the error).
    init(_ expected: String, _ read: @escaping @Sendable (String) -> Value?) {
        self.read = { (text: String) throws(ConfigProblem) -> Value in
            guard let value = read(text) else { throw .notA(expected) }
            return value
        }
    }

    /// This value, turned into another type after it was read.
    func map<Other>(_ transform: @escaping @Sendable (Value) -> Other) -> ConfigValue<Other> {
        ConfigValue<Other>(reading: { (text: String) throws(ConfigProblem) -> Other in
            transform(try read(text))
        })
    }

    /// An empty value (or one of `none`, compared without case) is nil: the default or no limit.
    func orEmpty(_ none: [String] = [], also expected: String? = nil) -> ConfigValue<Value?> {
        ConfigValue<Value?>(reading: { (text: String) throws(ConfigProblem) -> Value? in
            if text.isEmpty || none.contains(text.lowercased()) { return nil }
            do throws(ConfigProblem) { return try read(text) } catch {
                guard let expected, case .notA(let was) = error else { throw error }
                throw .notA(was + expected)
            }
        })
    }
}

/// What is wrong with a value: it is not what the key takes (`is not a size`), or a sentence of
/// its own (`UIDRange starts at 0; ids below 1000 belong to the system`).
public enum ConfigProblem: Error, Equatable, Sendable {
    case notA(String)
    case says(String)
}

extension ConfigValue where Value == Bool {
    /// yes/no/true/false/1/0/on/off, as systemd reads booleans.
    static var yesNo: ConfigValue { ConfigValue("yes or no", ConfigText.boolean) }
}

extension ConfigValue where Value == String {
    /// Any text, as written.
    static var text: ConfigValue { ConfigValue("text") { $0 } }

    /// An absolute path, or empty when `emptyAllowed`.
    static func absolutePath(emptyAllowed: Bool) -> ConfigValue {
        ConfigValue("an absolute path") {
            $0.hasPrefix("/") || (emptyAllowed && $0.isEmpty) ? $0 : nil
        }
    }
}

extension ConfigValue where Value == Int {
    /// A whole number above 0.
    static var count: ConfigValue {
        ConfigValue("a positive whole number") { Int($0).flatMap { $0 > 0 ? $0 : nil } }
    }

    /// A whole number in `range`; `expected` says it in words.
    static func integer(_ range: ClosedRange<Int>, _ expected: String) -> ConfigValue {
        ConfigValue(expected) { Int($0).flatMap { range.contains($0) ? $0 : nil } }
    }

    /// Whole seconds, `120` or `120s`.
    static func wholeSeconds(_ range: ClosedRange<Int>) -> ConfigValue {
        ConfigValue("a number of seconds (\(range.lowerBound)-\(range.upperBound))") {
            Int(ConfigText.dropping("s", from: $0)).flatMap { range.contains($0) ? $0 : nil }
        }
    }
}

extension ConfigValue where Value == Double {
    /// Seconds, `5`, `1.5` or `1.5s`.
    static func seconds(_ range: ClosedRange<Double>) -> ConfigValue {
        let words = "\(ConfigText.number(range.lowerBound))-\(ConfigText.number(range.upperBound))"
        return ConfigValue("a number of seconds (\(words))") {
            Double(ConfigText.dropping("s", from: $0)).flatMap { range.contains($0) ? $0 : nil }
        }
    }

    /// A share, `10` or `10%`, 0 to 100.
    static var percent: ConfigValue {
        ConfigValue("a percentage (0-100; 0 turns it off)") {
            Double(ConfigText.dropping("%", from: $0)).flatMap { (0...100).contains($0) ? $0 : nil }
        }
    }
}

extension ConfigValue where Value == Int64 {
    /// A size: `4096`, `64K`, `300M`, `4G`, `1T` (powers of 1024), at least `minimum`.
    static func size(atLeast minimum: Int64 = 1, _ expected: String = ConfigText.sizeWords)
        -> ConfigValue
    {
        ConfigValue(expected) { ConfigText.size($0).flatMap { $0 >= minimum ? $0 : nil } }
    }
}

extension ConfigValue where Value == [String] {
    /// Patterns (exact, a prefix ending in `*`, or `*`), space-separated.
    static var patterns: ConfigValue {
        ConfigValue("a list of patterns (exact, a prefix ending in *, or *)", ConfigText.patterns)
    }

    /// Patterns of absolute program paths.
    static var programPaths: ConfigValue {
        ConfigValue(reading: { (text: String) throws(ConfigProblem) -> [String] in
            let words = try patterns.read(text)
            guard words.allSatisfy({ $0 == "*" || $0.hasPrefix("/") }) else {
                throw .notA(
                    "a list of absolute paths of programs (exact, a prefix ending in *, or *)")
            }
            return words
        })
    }

    /// Space-separated absolute paths, none with a `..`.
    static var absolutePaths: ConfigValue {
        ConfigValue(reading: { (text: String) throws(ConfigProblem) -> [String] in
            let paths = ConfigText.words(text)
            if let bad = paths.first(where: {
                !$0.hasPrefix("/") || $0.split(separator: "/").contains("..")
            }) {
                throw .notA("a list of absolute paths without '..' (\(bad) is not)")
            }
            return paths
        })
    }

    /// Words each in `known`, space-separated; `emptyMeans` is added to the error's words.
    static func each(of known: [String], emptyMeans: String = "") -> ConfigValue {
        ConfigValue("a space-separated list of " + known.joined(separator: ", ") + emptyMeans) {
            let words = $0.split(whereSeparator: \.isWhitespace).map(String.init)
            return words.allSatisfy(known.contains) ? words : nil
        }
    }
}

extension ConfigValue where Value: RawRepresentable & CaseIterable, Value.RawValue == String {
    /// One of the type's cases, by its name: `single or all`.
    static var oneOf: ConfigValue {
        let names = Value.allCases.map(\.rawValue)
        let words =
            names.count > 1
            ? names.dropLast().joined(separator: ", ") + " or " + names[names.count - 1]
            : names.joined()
        return ConfigValue(words) { Value(rawValue: $0) }
    }
}

/// The small readings every kind of value shares.
enum ConfigText {
    static let sizeWords = "a size (a number with an optional K, M, G or T suffix)"

    /// yes/no/true/false/1/0/on/off.
    static func boolean(_ value: String) -> Bool? {
        switch value.lowercased() {
        case "yes", "true", "1", "on": true
        case "no", "false", "0", "off": false
        default: nil
        }
    }

    /// `4096`, `64K`, `300M`, `4G`, `1T` (powers of 1024).
    static func size(_ text: String) -> Int64? {
        let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        guard let last = text.last else { return nil }
        if let unit = units[Character(last.uppercased())] {
            guard let n = Int64(text.dropLast()), n <= Int64.max / unit else { return nil }
            return n * unit
        }
        return Int64(text)
    }

    /// `text` without one trailing `suffix` (a unit the value may be written with).
    static func dropping(_ suffix: Character, from text: String) -> String {
        text.last == suffix ? String(text.dropLast()) : text
    }

    /// Words separated by spaces.
    static func words(_ text: String) -> [String] { text.split(separator: " ").map(String.init) }

    /// A `[Signer]`, `[Signing]` or `RevokeEntitlements=` pattern list: `*` only at the end.
    static func patterns(_ value: String) -> [String]? {
        let words = value.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard words.allSatisfy({ !$0.dropLast().contains("*") }) else { return nil }
        return words
    }

    /// `3600`, `0.1`: a bound as an error message writes it.
    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
    }
}

extension StringProtocol {
    /// Spaces (Unicode Zs) and tabs off both ends, as AppdAPI's `trimmingWhitespace`: what a
    /// line of appd.conf is read without.
    func trimmingWhitespace() -> String {
        func isWhitespace(_ scalar: Unicode.Scalar) -> Bool {
            scalar == "\t" || scalar.properties.generalCategory == .spaceSeparator
        }
        let scalars = String(self).unicodeScalars
        guard let first = scalars.firstIndex(where: { !isWhitespace($0) }),
            let last = scalars.lastIndex(where: { !isWhitespace($0) })
        else { return "" }
        return String(scalars[first...last])
    }
}
