import Foundation

extension Preferences {
    /// A string, or a number or bool as text (UserDefaults does the same).
    public func string(forKey key: String) -> String? {
        guard let value = object(forKey: key) else { return nil }
        if let text = value as? String { return text }
        if let flag = PlistValue.bool(value) { return flag ? "1" : "0" }
        if let number = PlistValue.double(value) {
            return number.rounded() == number && abs(number) < 1e15
                ? String(Int(number)) : String(number)
        }
        return nil
    }

    /// 0 when absent or not a number; a string such as "42" from the arguments domain counts.
    public func integer(forKey key: String) -> Int {
        guard let value = object(forKey: key) else { return 0 }
        if let flag = PlistValue.bool(value) { return flag ? 1 : 0 }
        if let number = PlistValue.integer(value) { return number }
        if let text = value as? String {
            return Int(text) ?? Double(text).flatMap { Int(exactly: $0.rounded(.towardZero)) } ?? 0
        }
        return 0
    }

    public func double(forKey key: String) -> Double {
        guard let value = object(forKey: key) else { return 0 }
        if let flag = PlistValue.bool(value) { return flag ? 1 : 0 }
        if let number = PlistValue.double(value) { return number }
        if let text = value as? String { return Double(text) ?? 0 }
        return 0
    }

    /// True for true, a non-zero number, or "YES"/"true"/"1" (the forms `-key YES` takes).
    public func bool(forKey key: String) -> Bool {
        guard let value = object(forKey: key) else { return false }
        if let flag = PlistValue.bool(value) { return flag }
        if let number = PlistValue.double(value) { return number != 0 }
        if let text = value as? String {
            return ["yes", "true", "y", "t"].contains(text.lowercased()) || (Int(text) ?? 0) != 0
        }
        return false
    }

    public func data(forKey key: String) -> Data? { object(forKey: key) as? Data }

    public func array(forKey key: String) -> [Any]? { object(forKey: key) as? [Any] }

    public func stringArray(forKey key: String) -> [String]? { object(forKey: key) as? [String] }

    public func dictionary(forKey key: String) -> [String: Any]? {
        object(forKey: key) as? [String: Any]
    }

    /// A URL stored by `set(_:forKey:)` (its string); a plain path counts as a file URL.
    public func url(forKey key: String) -> URL? {
        guard let text = object(forKey: key) as? String, !text.isEmpty else { return nil }
        if text.hasPrefix("/") { return URL(fileURLWithPath: text) }
        if text.hasPrefix("~/"),
            let home = folder?.deletingLastPathComponent().deletingLastPathComponent()
        {
            return home.appendingPathComponent(String(text.dropFirst(2)))
        }
        return URL(string: text)
    }

    public func set(_ value: Int, forKey key: String) { set(value as Any, forKey: key) }
    public func set(_ value: Double, forKey key: String) { set(value as Any, forKey: key) }
    public func set(_ value: Bool, forKey key: String) { set(value as Any, forKey: key) }
    public func set(_ url: URL?, forKey key: String) {
        set(url?.absoluteString as Any?, forKey: key)
    }
}

/// The property-list value types, and how Foundation hands them back: on Linux a number read
/// from a plist may be an `NSNumber` or a Swift `Int`/`Double`/`Bool`, so readers ask here
/// rather than cast.
enum PlistValue {
    /// `value` as something a plist can hold, or nil. URLs become their string.
    static func normalize(_ value: Any) -> Any? {
        switch value {
        case let url as URL: return url.absoluteString
        case is String, is Data, is Date, is Bool: return value
        case let number as NSNumber: return number
        case is Int, is Int8, is Int16, is Int32, is Int64, is UInt, is UInt8, is UInt16,
            is UInt32, is UInt64, is Double, is Float:
            return value
        case let array as [Any]:
            let items = array.compactMap(normalize)
            return items.count == array.count ? items : nil
        case let dictionary as [String: Any]:
            let items = dictionary.compactMapValues(normalize)
            return items.count == dictionary.count ? items : nil
        default: return nil
        }
    }

    static func bool(_ value: Any) -> Bool? {
        if let flag = value as? Bool, !(value is Int), !(value is Double) {
            if let number = value as? NSNumber, !isBoolean(number) { return nil }
            return flag
        }
        return nil
    }

    static func integer(_ value: Any) -> Int? {
        if let number = value as? Int { return number }
        if let number = value as? NSNumber { return number.intValue }
        if let number = value as? Double { return Int(exactly: number.rounded(.towardZero)) }
        return nil
    }

    static func double(_ value: Any) -> Double? {
        if let number = value as? Double { return number }
        if let number = value as? Int { return Double(number) }
        if let number = value as? NSNumber { return number.doubleValue }
        return nil
    }

    /// CFBoolean-backed numbers say so in their type encoding ("c"; Foundation also uses it for
    /// Int8, which a plist cannot hold apart from a bool anyway).
    private static func isBoolean(_ number: NSNumber) -> Bool {
        String(cString: number.objCType) == "c" || String(cString: number.objCType) == "B"
    }
}

/// The arguments domain: `-key value` pairs in the launch arguments, as NSUserDefaults reads
/// them. A value that looks like an OpenStep plist (`(a, b)`, `{k = v;}`, `<0a0b>`, `"quoted"`)
/// is parsed as one; anything else is a string. `--long` options are not defaults and are
/// skipped along with nothing else, so GNU-style flags can sit beside them.
enum ArgumentsDomain {
    static func parse(_ arguments: [String]) -> [String: Any] {
        var domain: [String: Any] = [:]
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            guard argument.count > 1, argument.hasPrefix("-"), !argument.hasPrefix("--"),
                index + 1 < arguments.count
            else {
                index += 1
                continue
            }
            domain[String(argument.dropFirst())] = value(arguments[index + 1])
            index += 2
        }
        return domain
    }

    private static func value(_ text: String) -> Any {
        guard let first = text.first, "({<\"".contains(first),
            let parsed = try? PropertyListSerialization.propertyList(
                from: Data(text.utf8), format: nil)
        else { return text }
        return parsed
    }
}
