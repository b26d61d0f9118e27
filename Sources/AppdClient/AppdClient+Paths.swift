extension AppdClient {
    /// `/v1/` and the components, each percent-encoded, then the query without its nil values:
    /// `path("apps", id, "launch")`, `path("instances", query: ["app": id, "all": nil])`.
    ///
    /// Only RFC 3986's unreserved characters go through as they are, so an id can never add a
    /// path segment (`/`), a query (`?`) or a traversal (`..` is encoded too).
    public static func path(_ components: String..., query: KeyValuePairs<String, String?> = [:])
        -> String
    {
        var path = "/v1"
        for component in components {
            path +=
                "/"
                + (component == "." || component == ".."
                    ? component.replacingDots() : percentEncoded(component))
        }
        let pairs = query.compactMap { key, value in
            value.map { "\(percentEncoded(key))=\(percentEncoded($0))" }
        }
        if !pairs.isEmpty { path += "?" + pairs.joined(separator: "&") }
        return path
    }

    /// Every byte of the UTF-8 form but `A-Z a-z 0-9 - . _ ~` as `%XX`.
    public static func percentEncoded(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                result.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                result += byte < 16 ? "%0\(hex)" : "%\(hex)"
            }
        }
        return result
    }
}

extension String {
    fileprivate func replacingDots() -> String {
        String(repeating: "%2E", count: count)
    }
}
