import AppBundle
import Foundation

/// Requested entitlements as appd prints them: every key with its typed value and what it means
/// on Linux (an effect, no Linux effect, or unknown). Requested is not granted: `appd profile`
/// shows what the sandbox actually allows.
struct EntitlementsView: Encodable {
    var requested: [EntitlementReport]
    var unknown: [String]

    init(_ entitlements: Entitlements) {
        requested = entitlements.report
        unknown = entitlements.unknownKeys
    }

    func printText(indent: String) {
        guard !requested.isEmpty else {
            print("\(indent)entitlements: none requested")
            return
        }
        print("\(indent)entitlements requested:")
        for entry in requested {
            print("\(indent)  \(entry.key) = \(Self.render(entry.value))")
            switch entry.meaning {
            case .linux(let effect, _): print("\(indent)      \(effect)")
            case .noLinuxEffect(let what): print("\(indent)      no Linux effect (\(what))")
            case .unknown: print("\(indent)      unknown to appd: kept, has no effect")
            }
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
