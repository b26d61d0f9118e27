import AppBundle
import Foundation

/// Requested entitlements as appd prints them: every key with its typed value.
struct EntitlementsView: Encodable {
    var requested: [String: PlistValue]

    init(_ entitlements: Entitlements) {
        requested = entitlements.values
    }

    func printText(indent: String) {
        guard !requested.isEmpty else {
            print("\(indent)entitlements: none requested")
            return
        }
        print("\(indent)entitlements:")
        for key in requested.keys.sorted() {
            print("\(indent)  \(key) = \(Self.render(requested[key]!))")
        }
    }

    static func render(_ value: PlistValue) -> String {
        switch value {
        case .bool(let b): "\(b)"
        case .integer(let i): "\(i)"
        case .real(let r): "\(r)"
        case .string(let s): "\"\(s)\""
        case .date(let d): ISO8601DateFormatter().string(from: d)
        case .data(let d): "<\(d.count) bytes>"
        case .array(let items): "[" + items.map(render).joined(separator: ", ") + "]"
        case .dictionary(let dict):
            "{" + dict.keys.sorted().map { "\($0): \(render(dict[$0]!))" }.joined(separator: ", ") + "}"
        }
    }
}
