/// Any JSON value: an entitlement's value as it was in Entitlements.plist (dates as ISO 8601
/// text, data as base64, as `appd --json` prints them).
public indirect enum JSONValue: Codable, Sendable, Equatable, CustomStringConvertible {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value):
            if value == value.rounded(), abs(value) < 1e15 {
                try container.encode(Int64(value))
            } else {
                try container.encode(value)
            }
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// As a plist reader would write it: `true`, `3`, `"text"`, `[a, b]`, `{k: v}`.
    public var description: String {
        switch self {
        case .null: "null"
        case .bool(let value): "\(value)"
        case .number(let value):
            value == value.rounded() && abs(value) < 1e15 ? "\(Int64(value))" : "\(value)"
        case .string(let value): "\"\(value)\""
        case .array(let items): "[" + items.map(\.description).joined(separator: ", ") + "]"
        case .object(let dict):
            "{"
                + dict.keys.sorted().map { "\($0): \(dict[$0]?.description ?? "")" }.joined(
                    separator: ", ") + "}"
        }
    }
}
