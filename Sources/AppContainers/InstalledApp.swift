import AppBundle
import AppdBase
import Foundation
import GRDB

/// One row of the registry: an installed app, or one uninstalled with `--keep-data` whose data
/// container and uid stay reserved for its return.
public struct InstalledApp: Sendable, Equatable, Codable, FetchableRecord, PersistableRecord {
    public enum State: String, Sendable, Codable {
        case installed
        /// Uninstalled with `--keep-data`: no bundle, data container and uid kept.
        case dataKept = "data-kept"
    }

    public static let databaseTableName = "apps"

    /// As written in Info.plist. Unique without regard to case (see `Registry`).
    public var bundleID: String
    public var state: State
    /// The app's own uid; its gid has the same number.
    public var uid: UInt32
    public var dataUUID: String
    /// nil when `state == .dataKept`.
    public var bundleUUID: String?
    /// The bundle directory's name inside its container (`Hello.app`).
    public var bundleName: String?
    public var title: String?
    public var version: String?
    public var shortVersion: String?
    /// The executable, relative to the bundle (`Hello`, `Contents/MacOS/Hello`).
    public var executable: String?
    public var layout: String?
    /// The entitlements granted at install (requested, signed, and allowed by the signer's
    /// policy) as a binary plist, so every value keeps its type. The sandbox is compiled from
    /// these alone.
    public var entitlements: Data?
    public var fileCount: Int?
    public var totalBytes: Int64?
    /// First install; kept across upgrades.
    public var installedAt: Date
    /// Last install or upgrade.
    public var updatedAt: Date
    /// The key that signed the installed bundle; nil for an unsigned app installed under
    /// `[Signing] AllowUnsigned=yes`, or one installed before appd checked signatures.
    public var signerKeyID: String?
    /// SHA-256 of the installed `_CodeSignature/CodeResources` (signed apps).
    public var codeResourcesHash: Data?
    /// SHA-256 of the executable and of the whole tree (`BundleManifest.digest`) as installed:
    /// what a launch compares the bundle container with.
    public var executableHash: Data?
    public var treeHash: Data?

    public var gid: UInt32 { uid }

    /// Its bundle id as the app's id: what the Supervisor, the denial log and the metrics key
    /// the app by (case aside, as the registry compares it).
    public var appID: AppID { AppID(bundleID) }

    public func bundleContainer(in root: StateRoot) -> String? {
        bundleUUID.map { root.bundleContainer($0) }
    }

    /// The bundle itself, `Containers/Bundle/<UUID>/Name.app`.
    public func bundlePath(in root: StateRoot) -> String? {
        guard let container = bundleContainer(in: root), let bundleName else { return nil }
        return "\(container)/\(bundleName)"
    }

    public func dataContainer(in root: StateRoot) -> String { root.dataContainer(dataUUID) }

    public func decodedEntitlements() throws -> Entitlements {
        guard let entitlements else { return Entitlements(values: [:]) }
        return try Entitlements(plistData: entitlements)
    }
}

extension InstalledApp {
    public static func databaseDateEncodingStrategy(for column: String)
        -> DatabaseDateEncodingStrategy
    {
        RegistryDates.encoding
    }

    public static func databaseDateDecodingStrategy(for column: String)
        -> DatabaseDateDecodingStrategy
    {
        RegistryDates.decoding
    }
}
