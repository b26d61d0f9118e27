import AppdBase
import PrintableText

/// `UIRequiredDeviceCapabilities` where it has a meaning on Linux: the CPU. iOS's installd
/// refuses an app whose required capabilities the device lacks; appd does the same for the
/// architecture entries and lists every other entry as having no effect (docs/info-plist.md).
public enum DeviceCapabilities {
    /// Entries that name a CPU, and the architecture (GOARCH) each means.
    public static let architectures: [String: String] = [
        "arm64": "arm64", "armv7": "arm", "x86_64": "amd64", "amd64": "amd64",
    ]

    /// The most entries read (iOS knows about 40 capabilities).
    public static let maxEntries = 256

    /// Why a bundle with `info` cannot run on a host of `hostArchitecture` by its
    /// `UIRequiredDeviceCapabilities` (an array of names, or a dictionary of name → true for
    /// required, false for must-not-have); empty when it can. A value of the wrong type is a
    /// problem too: the key is an install key.
    public static func problems(_ info: InfoPlist, hostArchitecture: String, hostName: String)
        -> [String]
    {
        let key = "UIRequiredDeviceCapabilities"
        var required: [(String, Bool)] = []
        switch info.raw[key] {
        case nil: return []
        case .array(let items)?:
            for item in items.prefix(maxEntries) {
                guard case .string(let name) = item else {
                    return ["\(key) must hold strings, not a \(item.typeName)"]
                }
                required.append((name, true))
            }
        case .dictionary(let items)?:
            for (name, value) in items.sorted(by: { $0.key < $1.key }).prefix(maxEntries) {
                guard case .bool(let wanted) = value else {
                    return ["\(key): \(Printable(name)) must be a boolean, not a \(value.typeName)"]
                }
                required.append((name, wanted))
            }
        case let value?:
            return ["\(key) must be an array or a dictionary, not a \(value.typeName)"]
        }
        var problems: [String] = []
        let wantedArchitectures = required.filter { $0.1 }.compactMap { architectures[$0.0] }
        if !wantedArchitectures.isEmpty, !wantedArchitectures.contains(hostArchitecture) {
            let names = required.filter { $0.1 && architectures[$0.0] != nil }.map(\.0)
            problems.append(
                "\(key) requires \(names.joined(separator: " or ")); \(hostName) is \(hostArchitecture)"
            )
        }
        for (name, wanted) in required where !wanted && architectures[name] == hostArchitecture {
            problems.append("\(key) excludes \(name); \(hostName) is \(hostArchitecture)")
        }
        return problems
    }

    /// The entries that have no effect on Linux, for `appd verify` to list.
    public static func ignored(_ info: InfoPlist) -> [String] {
        let names: [String]
        switch info.raw["UIRequiredDeviceCapabilities"] {
        case .array(let items)?:
            names = items.prefix(maxEntries).compactMap {
                if case .string(let name) = $0 { name } else { nil }
            }
        case .dictionary(let items)?: names = items.keys.sorted().prefix(maxEntries).map { $0 }
        default: names = []
        }
        return names.filter { architectures[$0] == nil }
    }
}
