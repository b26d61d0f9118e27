import AppdBase
import Foundation

/// A validated app bundle: what `appd verify` prints and what `appd install` registers.
///
/// Built only by `AppBundle.open(at:limits:)`, which walks the whole tree and parses the
/// property lists; holding one means every check passed.
public struct AppBundle: Sendable {
    /// Absolute path of the `Name.app` directory that was read.
    public let path: String
    public let layout: BundleLayout
    public let info: InfoPlist
    public let entitlements: Entitlements
    /// The executable, relative to the bundle root (`Hello` or `Contents/MacOS/Hello`).
    public let executablePath: String
    /// Regular files in the tree and their total size in bytes.
    public let fileCount: Int
    public let totalBytes: Int64
    /// Things worth telling the user that do not block an install.
    public let warnings: [BundleProblem]
    /// Every program the bundle carries, read (not run): the executable, each other file with
    /// an execute bit that is an ELF file or a script, and each ELF file under Frameworks/
    /// (docs/info-plist.md, "What a bundle must carry"). Sorted by path, the executable first.
    public let programs: [BundleProgram]
    /// The symlinks of the tree (relative path → target), for resolving a library's name the
    /// way the loader would; each already checked to stay inside the bundle.
    public let symlinks: [String: String]

    public init(
        path: String, layout: BundleLayout, info: InfoPlist, entitlements: Entitlements,
        executablePath: String, fileCount: Int, totalBytes: Int64, warnings: [BundleProblem],
        programs: [BundleProgram] = [], symlinks: [String: String] = [:]
    ) {
        self.path = path
        self.layout = layout
        self.info = info
        self.entitlements = entitlements
        self.executablePath = executablePath
        self.fileCount = fileCount
        self.totalBytes = totalBytes
        self.warnings = warnings
        self.programs = programs
        self.symlinks = symlinks
    }

    /// The bundle directory's own name, `Hello.app`.
    public var directoryName: String { (path as NSString).lastPathComponent }
}

/// iOS bundles are flat; macOS bundles keep everything under `Contents/`.
public enum BundleLayout: String, Sendable, Codable {
    /// `Info.plist`, the executable and resources at the root.
    case ios
    /// `Contents/Info.plist`, `Contents/MacOS/<exe>`, `Contents/Resources/`.
    case macos

    public var infoPlistPath: String { self == .ios ? "Info.plist" : "Contents/Info.plist" }
    public var entitlementsPath: String {
        self == .ios ? "Entitlements.plist" : "Contents/Entitlements.plist"
    }
    public func executablePath(_ name: String) -> String {
        self == .ios ? name : "Contents/MacOS/\(name)"
    }
    /// Where the bundle's own libraries live: `Frameworks/`, `Contents/Frameworks/`.
    public var frameworksPath: String { self == .ios ? "Frameworks" : "Contents/Frameworks" }
}

/// The keys of Info.plist appd interprets, validated; everything else is kept in `raw`.
public struct InfoPlist: Sendable {
    public let identifier: BundleIdentifier
    public let executable: String
    public let version: BundleVersion
    public let shortVersion: String?
    public let name: String?
    public let displayName: String?
    public let packageType: String?
    /// The whole dictionary, types preserved.
    public let raw: [String: PlistValue]

    public init(
        identifier: BundleIdentifier, executable: String, version: BundleVersion,
        shortVersion: String?, name: String?, displayName: String?, packageType: String?,
        raw: [String: PlistValue]
    ) {
        self.identifier = identifier
        self.executable = executable
        self.version = version
        self.shortVersion = shortVersion
        self.name = name
        self.displayName = displayName
        self.packageType = packageType
        self.raw = raw
    }

    /// What a person would call the app: display name, then name, then the executable.
    public var title: String { displayName ?? name ?? executable }
}
