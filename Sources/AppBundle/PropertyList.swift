import AppdBase
import Foundation

/// A property-list value with its type kept: entitlement values are bools, strings, arrays and
/// dictionaries, and a policy must see which one a bundle actually wrote.
public indirect enum PlistValue: Sendable, Equatable {
    case bool(Bool)
    case integer(Int64)
    case real(Double)
    case string(String)
    case date(Date)
    case data(Data)
    case array([PlistValue])
    case dictionary([String: PlistValue])

    /// Converts what `PropertyListSerialization` returns. Foundation on Linux hands back `Bool`
    /// for `<true/>`/`<false/>` and `NSNumber` for numbers; an `NSNumber` 0 or 1 also answers
    /// `is Bool`, so the exact type decides.
    init(foundation object: Any) throws {
        switch object {
        case let value as String: self = .string(value)
        case let value as Data: self = .data(value)
        case let value as Date: self = .date(value)
        case let value as [Any]: self = .array(try value.map(PlistValue.init(foundation:)))
        case let value as [String: Any]:
            self = .dictionary(try value.mapValues(PlistValue.init(foundation:)))
        case let value as Bool where type(of: object) == Bool.self: self = .bool(value)
        case let number as NSNumber:
            switch String(cString: number.objCType) {
            case "d", "f": self = .real(number.doubleValue)
            case "c" where number.int64Value == 0 || number.int64Value == 1:
                self = .bool(number.boolValue)
            default: self = .integer(number.int64Value)
            }
        default:
            throw AppdError(
                .invalidBundle, "unsupported property-list value of type \(type(of: object))")
        }
    }

    /// The Foundation object graph, for writing the value back out as a plist.
    var foundationObject: Any {
        switch self {
        case .bool(let value): value
        case .integer(let value): NSNumber(value: value)
        case .real(let value): NSNumber(value: value)
        case .string(let value): value
        case .date(let value): value
        case .data(let value): value
        case .array(let items): items.map(\.foundationObject)
        case .dictionary(let dict): dict.mapValues(\.foundationObject)
        }
    }

    /// The plist type name, as people who write plists know it.
    public var typeName: String {
        switch self {
        case .bool: "boolean"
        case .integer: "integer"
        case .real: "real"
        case .string: "string"
        case .date: "date"
        case .data: "data"
        case .array: "array"
        case .dictionary: "dictionary"
        }
    }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// Every string inside this value, at any depth.
    var allStrings: [String] {
        switch self {
        case .string(let value): [value]
        case .array(let items): items.flatMap(\.allStrings)
        case .dictionary(let dict): dict.values.flatMap(\.allStrings)
        default: []
        }
    }
}

/// Plain JSON: booleans, numbers, strings, arrays and objects; dates as ISO 8601 text and data
/// as base64 text, since JSON has neither.
extension PlistValue: Encodable {
    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .real(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .date(let value): try container.encode(ISO8601DateFormatter().string(from: value))
        case .data(let value): try container.encode(value.base64EncodedString())
        case .array(let items): try container.encode(items)
        case .dictionary(let dict): try container.encode(dict)
        }
    }
}

/// Reads the property lists of a bundle: XML or binary, a dictionary at the root, within a size
/// limit. OpenStep/text plists are refused (Foundation would read any bare word as one), and so
/// are XML entity declarations and duplicate keys, which Foundation resolves silently by keeping
/// the last one: a reviewer reading the file must see what appd sees.
enum PropertyListReader {
    /// Whether `text`'s bytes occur in `data`: a plain scan (Data.range(of:) was a seventh of
    /// the parse of a two-key plist, perf of appd-oci create). Plists are bounded by
    /// MaxInfoPlistBytes, so the quadratic worst case is too.
    static func contains(_ data: Data, _ text: String) -> Bool {
        let needle = Array(text.utf8)
        return data.withUnsafeBytes { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            guard let first = needle.first, bytes.count >= needle.count else { return false }
            var start = 0
            while start + needle.count <= bytes.count {
                if bytes[start] == first,
                    needle.indices.allSatisfy({ bytes[start + $0] == needle[$0] })
                {
                    return true
                }
                start += 1
            }
            return false
        }
    }

    static func dictionary(from data: Data, maxBytes: Int) throws(PlistFailure) -> [String:
        PlistValue]
    {
        guard !data.isEmpty else { throw PlistFailure("is empty") }
        guard data.count <= maxBytes else {
            throw PlistFailure(
                "is \(data.count) bytes, over the limit of \(maxBytes) (MaxInfoPlistBytes/MaxEntitlementsBytes in appd.conf)"
            )
        }
        let isBinary = data.starts(with: Array("bplist".utf8))
        if !isBinary {
            guard looksLikeXML(data) else {
                throw PlistFailure(
                    "is not an XML or binary property list (text and OpenStep plists are not accepted)"
                )
            }
            if contains(data, "<!ENTITY") {
                throw PlistFailure(
                    "declares XML entities, which are not accepted in a property list")
            }
            // The forms bundles are written in, read without Foundation; it reads the rest.
            if let dict = XMLPropertyList.dictionary(Array(data)) { return dict }
            try checkDuplicateKeys(data)
        }
        var format = PropertyListSerialization.PropertyListFormat.xml
        let object: Any
        do {
            object = try PropertyListSerialization.propertyList(
                from: data, options: [], format: &format)
        } catch {
            if isBinary { throw PlistFailure("is a malformed binary property list") }
            let reason = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String
            throw PlistFailure(
                "is not a well-formed XML property list" + (reason.map { " (\($0))" } ?? ""))
        }
        guard format == .xml || format == .binary else {
            throw PlistFailure(
                "is not an XML or binary property list (text and OpenStep plists are not accepted)")
        }
        guard let dict = object as? [String: Any] else {
            throw PlistFailure("must hold a dictionary at the top level")
        }
        do {
            return try dict.mapValues(PlistValue.init(foundation:))
        } catch {
            throw PlistFailure("holds a value appd cannot read: \(error)")
        }
    }

    /// After an optional byte-order mark and white space, XML starts with `<`.
    private static func looksLikeXML(_ data: Data) -> Bool {
        var bytes = data.prefix(64)[...]
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        let first = bytes.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }
        return first == UInt8(ascii: "<")
    }

    private static func checkDuplicateKeys(_ data: Data) throws(PlistFailure) {
        switch PlistKeyScanner.scan(Array(data)) {
        case .noDuplicate: return
        case .duplicate(let key): throw PlistFailure("has the key '\(key)' twice in one dictionary")
        case .refused(let reason): throw PlistFailure(reason)
        }
    }
}

extension PlistValue {
    /// The top-level dictionary of an XML or binary plist from outside (an app's preferences
    /// file, a client's import), at most `maxBytes`, read as bundles' plists are (no entities,
    /// no key twice, no text or OpenStep form). The error starts with `what`.
    public static func dictionary(plist data: Data, maxBytes: Int, what: String) throws
        -> [String: PlistValue]
    {
        do {
            return try PropertyListReader.dictionary(from: data, maxBytes: maxBytes)
        } catch {
            throw AppdError(.badRequest, "\(what) \(error.message)")
        }
    }

    /// `dictionary` as a binary (or XML) plist.
    public static func plistData(_ dictionary: [String: PlistValue], xml: Bool = false) throws
        -> Data
    {
        do {
            return try PropertyListSerialization.data(
                fromPropertyList: dictionary.mapValues(\.foundationObject),
                format: xml ? .xml : .binary, options: 0)
        } catch {
            throw AppdError(.badRequest, "cannot write the values as a property list: \(error)")
        }
    }
}

/// Why a plist could not be read; the caller adds the file name.
struct PlistFailure: Error {
    var message: String
    init(_ message: String) { self.message = message }
}
