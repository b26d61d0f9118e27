import Foundation

/// The app bundle's resources, localized: NSBundle's lookup, for both bundle layouts — flat iOS
/// (`Name.app/x.png`, `Name.app/de.lproj/`) and macOS (`Name.app/Contents/Resources/...`).
///
/// A resource is looked for first outside any `.lproj` folder, then in the `.lproj` folders in
/// `localizations` order (NSBundle's order). A string is looked up in the table of each
/// localization in turn, then in a table outside any `.lproj`; a key one translation lacks
/// falls through to the next (the development region's, usually) instead of showing the raw key.
public final class Resources: @unchecked Sendable {
    public enum Layout: String, Sendable {
        /// iOS: everything at the bundle's root.
        case flat
        /// macOS: `Contents/Info.plist`, `Contents/Resources/`.
        case contents
    }

    public let bundleURL: URL
    public let layout: Layout
    /// Where resources live: the bundle itself (flat) or `Contents/Resources`.
    public let resourcesURL: URL
    /// The bundle's Info.plist (read once; immutable, which is why the class may be shared).
    public let infoDictionary: [String: Any]
    /// The `.lproj` folders the bundle has, without the extension.
    public let availableLocalizations: [String]
    /// The `.lproj` folders in lookup order for the app's languages.
    public let localizations: [String]

    private let lock = NSLock()
    private var tables: [String: [String: String]] = [:]

    /// The running app's bundle (`APPD_BUNDLE_PATH`, else the `.app` around the executable),
    /// localized for the process's environment.
    public static func main() throws -> Resources {
        let environment = ProcessInfo.processInfo.environment
        return try Resources(
            bundleURL: BundleLocator.bundleURL(environment: environment),
            languages: Localization.preferredLanguages(environment: environment))
    }

    /// The bundle at `bundleURL`, localized for `environment`'s languages (`LANGUAGE`, `LC_ALL`,
    /// `LC_MESSAGES`, `LANG`).
    public convenience init(bundleURL: URL, environment: [String: String]) throws {
        try self.init(
            bundleURL: bundleURL,
            languages: Localization.preferredLanguages(environment: environment))
    }

    /// The bundle at `bundleURL`, localized for `languages` (tags such as `de-DE`, best first).
    public init(bundleURL: URL, languages: [String]) throws {
        let manager = FileManager.default
        self.bundleURL = bundleURL.standardizedFileURL
        if manager.fileExists(atPath: bundleURL.appendingPathComponent("Info.plist").path) {
            layout = .flat
            resourcesURL = self.bundleURL
        } else if manager.fileExists(
            atPath: bundleURL.appendingPathComponent("Contents/Info.plist").path)
        {
            layout = .contents
            resourcesURL = self.bundleURL.appendingPathComponent(
                "Contents/Resources", isDirectory: true)
        } else {
            throw AppRuntimeError(
                .notFound,
                "\(bundleURL.path) is not an app bundle: no Info.plist (looked for Info.plist and Contents/Info.plist)"
            )
        }
        infoDictionary = BundleLocator.infoDictionary(of: self.bundleURL) ?? [:]
        let entries = (try? manager.contentsOfDirectory(atPath: resourcesURL.path)) ?? []
        availableLocalizations = entries.filter { $0.hasSuffix(".lproj") }
            .map { String($0.dropLast(".lproj".count)) }.sorted()
        localizations = Localization.resolve(
            preferred: languages, available: availableLocalizations,
            developmentRegion: infoDictionary["CFBundleDevelopmentRegion"] as? String)
    }

    public var bundleIdentifier: String? { infoDictionary["CFBundleIdentifier"] as? String }

    /// The file `name.ext` (or `name` when `ext` is nil or empty), optionally in `subdirectory`,
    /// optionally only in one `localization`; nil if the bundle has no such file.
    public func url(
        forResource name: String, withExtension ext: String?, subdirectory: String? = nil,
        localization: String? = nil
    ) -> URL? {
        let file = ext.flatMap { $0.isEmpty ? nil : "\(name).\($0)" } ?? name
        var folders: [URL] = []
        if let localization {
            folders = [resourcesURL.appendingPathComponent("\(localization).lproj")]
        } else {
            folders =
                [resourcesURL]
                + localizations.map { resourcesURL.appendingPathComponent("\($0).lproj") }
        }
        for folder in folders {
            var candidate = folder
            if let subdirectory, !subdirectory.isEmpty {
                candidate.appendPathComponent(subdirectory)
            }
            candidate.appendPathComponent(file)
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory),
                !isDirectory.boolValue
            {
                return candidate
            }
        }
        return nil
    }

    /// NSBundle's `path(forResource:ofType:)`.
    public func path(forResource name: String, ofType ext: String?) -> String? {
        url(forResource: name, withExtension: ext)?.path
    }

    /// The translation of `key` in `table` (default `Localizable`); else `value` if given and not
    /// empty; else the key itself — NSBundle's rule, so a missing translation shows something.
    public func localizedString(forKey key: String, value: String? = nil, table: String? = nil)
        -> String
    {
        let name = table.flatMap { $0.isEmpty ? nil : $0 } ?? "Localizable"
        for localization in localizations + [""] {
            if let text = strings(name, localization: localization)[key] { return text }
        }
        if let value, !value.isEmpty { return value }
        return key
    }

    /// A table as parsed (cached); empty if the localization lacks it. A damaged table is
    /// reported once on stderr and reads as empty, so the app shows keys rather than crashing.
    private func strings(_ table: String, localization: String) -> [String: String] {
        let cacheKey = "\(localization)/\(table)"
        if let cached = lock.withLock({ tables[cacheKey] }) { return cached }
        var folder = resourcesURL
        if !localization.isEmpty { folder.appendPathComponent("\(localization).lproj") }
        let file = folder.appendingPathComponent("\(table).strings")
        var parsed: [String: String] = [:]
        if let data = try? Data(contentsOf: file) {
            do {
                parsed = try StringsFile.parse(data, name: file.path)
            } catch {
                runtimeLog("\(error)")
            }
        }
        lock.withLock { tables[cacheKey] = parsed }
        return parsed
    }
}
