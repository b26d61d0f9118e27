import AppBundle
import AppContainers
import AppdAPI
import Foundation

extension APIApp {
    init(_ app: InstalledApp, root: StateRoot, withEntitlements: Bool, running: Int? = nil) {
        var entitlements: APIEntitlements?
        if withEntitlements, let decoded = try? app.decodedEntitlements() {
            entitlements = APIEntitlements(decoded)
        }
        self.init(
            bundleId: app.bundleID, state: app.state.rawValue, title: app.title, version: app.version,
            shortVersion: app.shortVersion, uid: app.uid, gid: app.gid,
            bundleContainer: app.bundleContainer(in: root), bundlePath: app.bundlePath(in: root),
            dataContainer: app.dataContainer(in: root), executable: app.executable, layout: app.layout,
            fileCount: app.fileCount, totalBytes: app.totalBytes, installedAt: app.installedAt,
            updatedAt: app.updatedAt, entitlements: entitlements, running: running)
    }
}

extension APIEntitlements {
    init(_ entitlements: Entitlements) {
        self.init(
            requested: entitlements.report.map { entry in
                switch entry.meaning {
                case .linux(let effect, _):
                    APIEntitlement(key: entry.key, value: JSONValue(entry.value), status: "linux", effect: effect)
                case .noLinuxEffect(let what):
                    APIEntitlement(key: entry.key, value: JSONValue(entry.value), status: "no-linux-effect", effect: what)
                case .unknown:
                    APIEntitlement(key: entry.key, value: JSONValue(entry.value), status: "unknown", effect: nil)
                }
            },
            unknown: entitlements.unknownKeys)
    }
}

extension JSONValue {
    /// Dates as ISO 8601 text and data as base64, as `appd --json` always printed them.
    init(_ value: PlistValue) {
        switch value {
        case .bool(let b): self = .bool(b)
        case .integer(let i): self = .number(Double(i))
        case .real(let r): self = .number(r)
        case .string(let s): self = .string(s)
        case .date(let d): self = .string(ISO8601DateFormatter().string(from: d))
        case .data(let d): self = .string(d.base64EncodedString())
        case .array(let items): self = .array(items.map(JSONValue.init))
        case .dictionary(let dict): self = .object(dict.mapValues(JSONValue.init))
        }
    }
}
