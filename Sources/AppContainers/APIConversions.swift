import AppBundle
import AppdAPI
import AppdBase
import AppdConfig
import Foundation

// The registry's and the bundle reader's types as the API shows them: the daemon answers with
// these, and the in-process path of appd (`--no-daemon`, `verify`) prints the same, so a command
// reads the same whichever way it ran. Here, not in AppdServer, so that appd's subcommands need
// no server module for them (only `appd serve` runs the server).

extension APIApp {
    public init(_ app: InstalledApp, root: StateRoot, withEntitlements: Bool, running: Int? = nil) {
        self.init(
            bundleId: app.bundleID, state: app.state.rawValue, title: app.title,
            version: app.version,
            shortVersion: app.shortVersion, uid: app.uid, gid: app.gid,
            bundleContainer: app.bundleContainer(in: root), bundlePath: app.bundlePath(in: root),
            dataContainer: app.dataContainer(in: root), executable: app.executable,
            layout: app.layout,
            fileCount: app.fileCount, totalBytes: app.totalBytes, installedAt: app.installedAt,
            updatedAt: app.updatedAt, running: running, signer: app.signerKeyID)
        if withEntitlements, let decoded = try? app.decodedEntitlements() {
            entitlements = APIEntitlements(decoded)
        }
        if withEntitlements { setHandlers(app.handlers(in: root)) }
    }

    /// Its URL schemes and document types, as the API shows them (none: absent).
    public mutating func setHandlers(_ handlers: BundleHandlers) {
        urlSchemes = handlers.schemes.isEmpty ? nil : handlers.schemes
        documentTypes =
            handlers.documentTypes.isEmpty ? nil : handlers.documentTypes.map(APIDocumentType.init)
    }

    /// The app's `[App ID]` section as the API shows it.
    public static func adminOverride(_ override: AppOverride?) -> [String: String]? {
        guard let override else { return nil }
        var settings: [String: String] = [:]
        for line in override.lines { settings[line.key] = line.value }
        return settings.isEmpty ? nil : settings
    }
}

extension APIDocumentType {
    public init(_ type: BundleHandlers.DocumentType) {
        self.init(
            name: type.name, role: type.role.rawValue, extensions: type.extensions,
            mimeTypes: type.mimeTypes,
            contentTypes: type.contentTypes.isEmpty ? nil : type.contentTypes)
    }
}

extension APIStorage {
    public init(_ usage: StorageUsage) {
        self.init(
            appBytes: usage.appBytes, documentsAndDataBytes: usage.documentsAndDataBytes,
            cachesBytes: usage.cachesBytes, tmpBytes: usage.tmpBytes, entries: usage.entries,
            complete: usage.complete)
    }
}

extension APIEntitlements {
    public init(_ entitlements: Entitlements) {
        self.init(
            requested: entitlements.report.map(APIEntitlement.init),
            unknown: entitlements.unknownKeys)
    }
}

extension APIEntitlement {
    public init(_ report: EntitlementReport) {
        let (status, effect): (String, String?) =
            switch report.meaning {
            case .linux(let effect, _): ("linux", effect)
            case .noLinuxEffect(let what): ("no-linux-effect", what)
            case .unknown: ("unknown", nil)
            }
        self.init(key: report.key, value: JSONValue(report.value), status: status, effect: effect)
    }
}

extension JSONValue {
    /// As `appd --json` has always written a plist value: dates as ISO 8601 text, data as base64.
    public init(_ value: PlistValue) {
        switch value {
        case .bool(let value): self = .bool(value)
        case .integer(let value): self = .number(Double(value))
        case .real(let value): self = .number(value)
        case .string(let value): self = .string(value)
        case .date(let value): self = .string(ISO8601DateFormatter().string(from: value))
        case .data(let value): self = .string(value.base64EncodedString())
        case .array(let items): self = .array(items.map(JSONValue.init))
        case .dictionary(let dict): self = .object(dict.mapValues(JSONValue.init))
        }
    }
}

extension APIPlistValue {
    /// A plist value as the API carries it.
    public init(_ value: PlistValue) {
        switch value {
        case .string(let text): self = .string(text)
        case .integer(let number): self = .integer(number)
        case .real(let number): self = .real(number)
        case .bool(let flag): self = .bool(flag)
        case .date(let date): self = .date(date)
        case .data(let data): self = .data(data)
        case .array(let items): self = .array(items.map(APIPlistValue.init))
        case .dictionary(let dict): self = .dictionary(dict.mapValues(APIPlistValue.init))
        }
    }

    /// The plist value; nesting deeper than `PlistValue.maxDepth` is refused (a client's body).
    public func plistValue(depth: Int = 0) throws -> PlistValue {
        guard depth < 64 else {
            throw AppdError(.badRequest, "a preferences value nests deeper than 64 levels")
        }
        switch self {
        case .string(let text): return .string(text)
        case .integer(let number): return .integer(number)
        case .real(let number): return .real(number)
        case .bool(let flag): return .bool(flag)
        case .date(let date): return .date(date)
        case .data(let data): return .data(data)
        case .array(let items): return .array(try items.map { try $0.plistValue(depth: depth + 1) })
        case .dictionary(let dict):
            return .dictionary(try dict.mapValues { try $0.plistValue(depth: depth + 1) })
        }
    }
}
