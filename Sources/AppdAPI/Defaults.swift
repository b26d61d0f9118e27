#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A preferences value with its property-list type, as a one-key object:
/// `{"string": "x"}`, `{"integer": 3}`, `{"real": 0.5}`, `{"bool": true}`,
/// `{"date": "2026-01-02T03:04:05Z"}`, `{"data": "aGk="}` (base64), `{"array": [...]}`,
/// `{"dictionary": {"k": ...}}` (docs/lifecycle.md, "Preferences").
public indirect enum APIPlistValue: Codable, Sendable, Equatable {
    case string(String)
    case integer(Int64)
    case real(Double)
    case bool(Bool)
    case date(Date)
    case data(Data)
    case array([APIPlistValue])
    case dictionary([String: APIPlistValue])

    enum Key: String, CodingKey {
        case string, integer, real, bool, date, data, array, dictionary
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        guard container.allKeys.count == 1, let key = container.allKeys.first else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: container.codingPath,
                    debugDescription:
                        "a value is one of {\"string\": …}, {\"integer\": …}, {\"real\": …}, "
                        + "{\"bool\": …}, {\"date\": …}, {\"data\": …}, {\"array\": …}, "
                        + "{\"dictionary\": …}"))
        }
        switch key {
        case .string: self = .string(try container.decode(String.self, forKey: key))
        case .integer: self = .integer(try container.decode(Int64.self, forKey: key))
        case .real: self = .real(try container.decode(Double.self, forKey: key))
        case .bool: self = .bool(try container.decode(Bool.self, forKey: key))
        case .date: self = .date(try container.decode(Date.self, forKey: key))
        case .data: self = .data(try container.decode(Data.self, forKey: key))
        case .array: self = .array(try container.decode([APIPlistValue].self, forKey: key))
        case .dictionary:
            self = .dictionary(try container.decode([String: APIPlistValue].self, forKey: key))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        switch self {
        case .string(let value): try container.encode(value, forKey: .string)
        case .integer(let value): try container.encode(value, forKey: .integer)
        case .real(let value): try container.encode(value, forKey: .real)
        case .bool(let value): try container.encode(value, forKey: .bool)
        case .date(let value): try container.encode(value, forKey: .date)
        case .data(let value): try container.encode(value, forKey: .data)
        case .array(let value): try container.encode(value, forKey: .array)
        case .dictionary(let value): try container.encode(value, forKey: .dictionary)
        }
    }
}

/// `GET /v1/apps/{id}/defaults`: the app's preferences, by domain.
public struct APIDefaults: Codable, Sendable, Equatable {
    public var app: String
    /// The app's own domain (`Library/Preferences/ID.plist`), what the app and `appd defaults
    /// write` set.
    public var values: [String: APIPlistValue]

    public init(app: String, values: [String: APIPlistValue]) {
        self.app = app
        self.values = values
    }
}

/// `POST /v1/apps/{id}/defaults`: keys set and removed in the app's own domain, in one write;
/// with `replace`, the domain is `set` alone (an import).
public struct APIDefaultsChange: Codable, Sendable, Equatable {
    public var set: [String: APIPlistValue]?
    public var delete: [String]?
    public var replace: Bool?

    public init(
        set: [String: APIPlistValue]? = nil, delete: [String]? = nil, replace: Bool? = nil
    ) {
        self.set = set
        self.delete = delete
        self.replace = replace
    }
}

/// The answer to a change: the domain as written, and the running instances told
/// `defaultsDidChange`.
public struct APIDefaultsResult: Codable, Sendable, Equatable {
    public var app: String
    public var values: [String: APIPlistValue]
    public var told: [String]

    public init(app: String, values: [String: APIPlistValue], told: [String]) {
        self.app = app
        self.values = values
        self.told = told
    }
}
