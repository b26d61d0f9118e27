import Foundation

/// The app's places on disk, all from its environment — never hard-coded, since appd puts every
/// container at a random UUID path (docs/state-root.md):
///
/// - `home`: `CFFIXED_USER_HOME`, else `HOME` (the data container; appd sets both),
/// - `tmp`: `TMPDIR`, else `home/tmp`,
/// - the bundle: `APPD_BUNDLE_PATH`, else the `.app` folder holding the running executable,
/// - the bundle id: `APPD_BUNDLE_ID`, else `CFBundleIdentifier` from the bundle's Info.plist.
///
/// The fallbacks let an app assembled by scripts/build-sample run straight from its `.app`.
public struct AppContainer: Sendable, Equatable {
    public let home: URL
    public let tmp: URL
    public let bundleURL: URL
    public let bundleIdentifier: String

    public var documents: URL { home.appendingPathComponent("Documents", isDirectory: true) }
    public var library: URL { home.appendingPathComponent("Library", isDirectory: true) }
    public var preferences: URL { library.appendingPathComponent("Preferences", isDirectory: true) }
    public var caches: URL { library.appendingPathComponent("Caches", isDirectory: true) }
    public var applicationSupport: URL {
        library.appendingPathComponent("Application Support", isDirectory: true)
    }

    /// The container of the running app.
    public static func current() throws -> AppContainer {
        try AppContainer(environment: ProcessInfo.processInfo.environment)
    }

    /// Reads the places from `environment`; `executablePath` is where the bundle is looked for
    /// when `APPD_BUNDLE_PATH` is unset (default: the running executable).
    public init(environment: [String: String], executablePath: String? = nil) throws {
        guard
            let homePath = Self.nonEmpty(environment["CFFIXED_USER_HOME"])
                ?? Self.nonEmpty(environment["HOME"])
        else {
            throw AppRuntimeError(
                .missingEnvironment,
                "AppContainer: neither CFFIXED_USER_HOME nor HOME is set; appd sets both to the app's data container"
            )
        }
        home = try Self.directory(homePath, variable: "HOME")
        if let tmpPath = Self.nonEmpty(environment["TMPDIR"]) {
            tmp = try Self.directory(tmpPath, variable: "TMPDIR")
        } else {
            tmp = home.appendingPathComponent("tmp", isDirectory: true)
        }

        bundleURL = try BundleLocator.bundleURL(
            environment: environment, executablePath: executablePath)

        if let identifier = Self.nonEmpty(environment["APPD_BUNDLE_ID"]) {
            bundleIdentifier = identifier
        } else if let identifier = BundleLocator.infoDictionary(of: bundleURL)?[
            "CFBundleIdentifier"] as? String,
            !identifier.isEmpty
        {
            bundleIdentifier = identifier
        } else {
            throw AppRuntimeError(
                .missingEnvironment,
                "AppContainer: APPD_BUNDLE_ID is not set and \(bundleURL.path) has no CFBundleIdentifier in its Info.plist"
            )
        }
    }

    fileprivate static func nonEmpty(_ value: String?) -> String? {
        guard let value, !value.isEmpty else { return nil }
        return value
    }

    /// Paths from the environment must be absolute: a relative one would silently resolve
    /// against whatever the working directory happens to be.
    fileprivate static func directory(_ path: String, variable: String) throws -> URL {
        guard path.hasPrefix("/") else {
            throw AppRuntimeError(
                .invalidEnvironment,
                "AppContainer: \(variable) is '\(path)', not an absolute path")
        }
        return URL(fileURLWithPath: path, isDirectory: true).standardizedFileURL
    }
}

/// Finds the bundle around an executable, in either layout.
enum BundleLocator {
    /// `APPD_BUNDLE_PATH`, else the `.app` folder around `executablePath` (default: the
    /// running executable).
    static func bundleURL(environment: [String: String], executablePath: String? = nil) throws
        -> URL
    {
        if let bundlePath = AppContainer.nonEmpty(environment["APPD_BUNDLE_PATH"]) {
            return try AppContainer.directory(bundlePath, variable: "APPD_BUNDLE_PATH")
        }
        let executable = executablePath ?? Self.executablePath()
        guard let found = bundle(containing: executable) else {
            throw AppRuntimeError(
                .missingEnvironment,
                "APPD_BUNDLE_PATH is not set and the executable \(executable) is not inside a .app bundle"
            )
        }
        return found
    }

    /// The running executable, through /proc so that a symlink to it does not count.
    static func executablePath() -> String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments.first ?? ""
    }

    /// `Name.app/Name` (flat, iOS) or `Name.app/Contents/MacOS/Name` (macOS): the folder that
    /// holds Info.plist at the place its layout says.
    static func bundle(containing executable: String) -> URL? {
        let folder = URL(fileURLWithPath: executable).deletingLastPathComponent()
        let manager = FileManager.default
        if manager.fileExists(atPath: folder.appendingPathComponent("Info.plist").path) {
            return folder.standardizedFileURL
        }
        let contents = folder.deletingLastPathComponent()
        if folder.lastPathComponent == "MacOS", contents.lastPathComponent == "Contents",
            manager.fileExists(atPath: contents.appendingPathComponent("Info.plist").path)
        {
            return contents.deletingLastPathComponent().standardizedFileURL
        }
        return nil
    }

    static func infoPlistURL(of bundle: URL) -> URL {
        let flat = bundle.appendingPathComponent("Info.plist")
        if FileManager.default.fileExists(atPath: flat.path) { return flat }
        return bundle.appendingPathComponent("Contents/Info.plist")
    }

    static func infoDictionary(of bundle: URL) -> [String: Any]? {
        guard let data = try? Data(contentsOf: infoPlistURL(of: bundle)) else { return nil }
        return (try? PropertyListSerialization.propertyList(from: data, format: nil))
            as? [String: Any]
    }
}
