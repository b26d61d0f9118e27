import AppdBase

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// One `CFBundleDocumentTypes` entry: its role (`Editor`, `Viewer`, `None`), the extensions
/// (without their dot) and MIME types it claims, its known content types' included.
public struct APIDocumentType: Codable, Sendable, Equatable {
    public var name: String?
    public var role: String
    public var extensions: [String]
    public var mimeTypes: [String]
    public var contentTypes: [String]?

    public init(
        name: String?, role: String, extensions: [String], mimeTypes: [String],
        contentTypes: [String]?
    ) {
        self.name = name
        self.role = role
        self.extensions = extensions
        self.mimeTypes = mimeTypes
        self.contentTypes = contentTypes
    }

    /// `Editor: .txt .text text/plain` as `appd info` and `appd verify` print it.
    public var text: String {
        "\(role): " + (extensions.map { "." + $0 } + mimeTypes).joined(separator: " ")
    }
}

/// An installed app as `GET /v1/apps` and `GET /v1/apps/{id}` return it (and `appd list`,
/// `appd info`, `appctl list`, `appctl info` print it).
public struct APIApp: Codable, Sendable, Equatable {
    public var bundleId: String
    /// `installed`, or `data-kept` (uninstalled with --keep-data).
    public var state: String
    public var title: String?
    public var version: String?
    public var shortVersion: String?
    public var uid: UInt32
    public var gid: UInt32
    public var bundleContainer: String?
    public var bundlePath: String?
    public var dataContainer: String
    public var executable: String?
    public var layout: String?
    public var fileCount: Int?
    public var totalBytes: Int64?
    public var installedAt: Date
    public var updatedAt: Date
    /// Only in single-app answers (`GET /v1/apps/{id}`, install, uninstall).
    public var entitlements: APIEntitlements?
    /// Instances of this app not yet exited (in `GET /v1/apps/{id}`).
    public var running: Int?
    /// Denials of the app since the daemon started (`appctl info`; `appctl denials ID` lists them).
    public var denials: Int?
    /// The key id of the signer (docs/code-signing.md); nil for an app installed unsigned
    /// under `[Signing] AllowUnsigned=yes`.
    public var signer: String?
    /// The admin's `[App ID]` section of appd.conf as `Key: Value` (`MemoryMax: 64M`,
    /// `RevokeEntitlements: com.apple.security.network.client`); only in single-app answers,
    /// absent when the app has none.
    public var adminOverride: [String: String]?
    /// How appd runs it as a service (RunAtLoad, KeepAlive), in `GET /v1/apps/{id}`; absent
    /// when its `[App ID]` sets neither.
    public var service: APIService?
    /// What the app takes on disk, as iOS's storage screen shows it; only in `GET /v1/apps/{id}`
    /// (and `appd info --no-daemon`).
    public var storage: APIStorage?
    /// The URL schemes it opens (`CFBundleURLTypes` of its signed Info.plist), in single-app
    /// answers; absent when it claims none.
    public var urlSchemes: [String]?
    /// The documents it opens (`CFBundleDocumentTypes`), in single-app answers; absent when it
    /// claims none.
    public var documentTypes: [APIDocumentType]?

    public init(
        bundleId: String, state: String, title: String? = nil, version: String? = nil,
        shortVersion: String? = nil, uid: UInt32, gid: UInt32, bundleContainer: String? = nil,
        bundlePath: String? = nil, dataContainer: String, executable: String? = nil,
        layout: String? = nil, fileCount: Int? = nil, totalBytes: Int64? = nil, installedAt: Date,
        updatedAt: Date, entitlements: APIEntitlements? = nil, running: Int? = nil,
        signer: String? = nil
    ) {
        self.bundleId = bundleId
        self.state = state
        self.title = title
        self.version = version
        self.shortVersion = shortVersion
        self.uid = uid
        self.gid = gid
        self.bundleContainer = bundleContainer
        self.bundlePath = bundlePath
        self.dataContainer = dataContainer
        self.executable = executable
        self.layout = layout
        self.fileCount = fileCount
        self.totalBytes = totalBytes
        self.installedAt = installedAt
        self.updatedAt = updatedAt
        self.entitlements = entitlements
        self.running = running
        self.signer = signer
    }

    /// `1.0 (3)`: the marketing version and the build, as Finder and Xcode show them.
    public var versionText: String {
        switch (shortVersion, version) {
        case (let short?, let build?) where short != build: "\(short) (\(build))"
        case (_, let build?): build
        default: "-"
        }
    }
}

/// An app's storage: bytes allocated on disk (`st_blocks` × 512, what the data quota counts),
/// measured by the daemon when asked with a walk that follows no symlink and enters no mount.
/// The walk is bounded (a million entries, one second): when it stops early, `complete` is
/// false and each figure is "at least".
public struct APIStorage: Codable, Sendable, Equatable {
    /// The bundle container: the app itself.
    public var appBytes: Int64
    /// "Documents & Data": the data container but `Library/Caches` and `tmp`.
    public var documentsAndDataBytes: Int64
    /// `Library/Caches`: may vanish whenever the app is not running.
    public var cachesBytes: Int64
    /// `tmp`: emptied when the app's last instance exits.
    public var tmpBytes: Int64
    /// Files, folders and links counted.
    public var entries: Int
    public var complete: Bool

    public init(
        appBytes: Int64, documentsAndDataBytes: Int64, cachesBytes: Int64, tmpBytes: Int64,
        entries: Int, complete: Bool
    ) {
        self.appBytes = appBytes
        self.documentsAndDataBytes = documentsAndDataBytes
        self.cachesBytes = cachesBytes
        self.tmpBytes = tmpBytes
        self.entries = entries
        self.complete = complete
    }
}

/// Requested entitlements: every key with its value and what it means on Linux. Requested is
/// not granted: `appd profile` shows what the sandbox actually allows.
public struct APIEntitlements: Codable, Sendable, Equatable {
    public var requested: [APIEntitlement]
    /// Keys appd does not know (kept, no effect).
    public var unknown: [String]

    public init(requested: [APIEntitlement], unknown: [String]) {
        self.requested = requested
        self.unknown = unknown
    }
}

public struct APIEntitlement: Codable, Sendable, Equatable {
    public var key: String
    public var value: JSONValue
    /// `linux` (the sandbox acts on it), `no-linux-effect`, or `unknown`.
    public var status: String
    public var effect: String?

    public init(key: String, value: JSONValue, status: String, effect: String?) {
        self.key = key
        self.value = value
        self.status = status
        self.effect = effect
    }
}

/// The answer to `POST /v1/apps` (install or upgrade).
public struct APIInstallResult: Codable, Sendable {
    public var app: APIApp
    /// The CFBundleVersion replaced, for an upgrade.
    public var previousVersion: String?
    /// A reinstall that found the data container kept by `uninstall --keep-data`.
    public var reusedData: Bool
    public var warnings: [BundleProblem]
    /// `appd install --restart`: the instances that replaced the outdated ones (filled in by
    /// the client, never by the daemon).
    public var restarted: [APIInstance]?

    public init(app: APIApp, previousVersion: String?, reusedData: Bool, warnings: [BundleProblem])
    {
        self.app = app
        self.previousVersion = previousVersion
        self.reusedData = reusedData
        self.warnings = warnings
    }
}

/// The answer to `DELETE /v1/apps/{id}`.
public struct APIUninstallResult: Codable, Sendable {
    public var app: APIApp
    public var keptData: Bool

    public init(app: APIApp, keptData: Bool) {
        self.app = app
        self.keptData = keptData
    }
}

/// `GET /v1/apps/{id}/containers/{kind}[/{group}]`: a container's path on the host.
public struct APIContainer: Codable, Sendable, Equatable {
    /// `data`, `bundle` or `group`.
    public var kind: String
    public var path: String
    /// For `group`: the application-group id.
    public var group: String?

    public init(kind: String, path: String, group: String? = nil) {
        self.kind = kind
        self.path = path
        self.group = group
    }
}
