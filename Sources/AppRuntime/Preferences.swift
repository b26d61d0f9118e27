import Foundation

/// A `UserDefaults`-like store: the app's settings, kept in the data container.
///
/// A key is looked up in the domains of NSUserDefaults, first match wins:
/// 1. arguments — `-key value` pairs in the launch arguments (never saved),
/// 2. application — `Library/Preferences/<bundle-id>.plist`, what `set` writes,
/// 3. global (`NSGlobalDomain`) — `Library/Preferences/.GlobalPreferences.plist`, as on macOS.
///    appd gives each app its own data container, so this file is global to the app only (as on
///    iOS, where the sandbox has its own); an app or its installer may write it with
///    `setPersistentDomain(_:forName:)`,
/// 4. language — `AppleLanguages` (the preferred languages, `["de-DE", "de"]`) and
///    `AppleLocale` (`de_DE`) from the locale appd gives the app (`LANG`: the host's),
/// 5. registration — `register(defaults:)`, in memory.
///
/// Each `set`/`removeObject` saves the application domain at once, atomically, as a binary
/// plist: an app may be frozen and then killed without notice in the background, so there is no
/// later moment a deferred save could count on. `synchronize()` retries a failed save and
/// re-reads the files. Thread-safe.
public final class Preferences: @unchecked Sendable {
    public static let globalDomain = "NSGlobalDomain"
    public static let globalFileName = ".GlobalPreferences.plist"

    /// The app's preferences, from its container; in memory only (with a line on stderr saying
    /// why) if the environment does not name one.
    public static let standard: Preferences = {
        do {
            return try Preferences(container: AppContainer.current())
        } catch {
            runtimeLog("Preferences.standard: \(error); preferences are kept in memory only")
            return Preferences(inMemoryArguments: Array(CommandLine.arguments.dropFirst()))
        }
    }()

    public let bundleIdentifier: String
    /// The `Library/Preferences` folder; nil for an in-memory store.
    public let folder: URL?

    private let lock = NSLock()
    private var arguments: [String: Any]
    private var application: [String: Any] = [:]
    private var global: [String: Any] = [:]
    private var registration: [String: Any] = [:]
    private let language = LanguageDomain.values(ProcessInfo.processInfo.environment)
    /// The application domain differs from its file (a save failed).
    private var unsaved = false

    /// The preferences of the app in `container`; `arguments` are the launch arguments (default:
    /// the process's own).
    public convenience init(
        container: AppContainer, arguments: [String] = Array(CommandLine.arguments.dropFirst())
    ) throws {
        try self.init(
            folder: container.preferences, bundleIdentifier: container.bundleIdentifier,
            arguments: arguments)
    }

    public init(folder: URL, bundleIdentifier: String, arguments: [String] = []) throws {
        guard !bundleIdentifier.isEmpty, !bundleIdentifier.contains("/"),
            !bundleIdentifier.hasPrefix(".")
        else {
            throw AppRuntimeError(
                .invalidValue,
                "Preferences: '\(bundleIdentifier)' cannot name a preferences file")
        }
        self.folder = folder
        self.bundleIdentifier = bundleIdentifier
        self.arguments = ArgumentsDomain.parse(arguments)
        application = Self.load(applicationURL)
        global = Self.load(globalURL)
    }

    private init(inMemoryArguments arguments: [String]) {
        folder = nil
        bundleIdentifier = ""
        self.arguments = ArgumentsDomain.parse(arguments)
    }

    /// `Library/Preferences/<bundle-id>.plist`.
    public var applicationURL: URL? {
        folder?.appendingPathComponent("\(bundleIdentifier).plist")
    }

    public var globalURL: URL? { folder?.appendingPathComponent(Self.globalFileName) }

    private func url(forDomain name: String) -> URL? {
        name == Self.globalDomain ? globalURL : name == bundleIdentifier ? applicationURL : nil
    }

    /// A damaged file reads as empty (and is replaced by the next save) rather than stopping the
    /// app from launching; the log says so.
    private static func load(_ url: URL?) -> [String: Any] {
        guard let url else { return [:] }
        do {
            return try PropertyListFile.read(url) ?? [:]
        } catch {
            runtimeLog("Preferences: \(error); starting from an empty domain")
            return [:]
        }
    }

    // MARK: Reading

    /// The value for `key` from the first domain that has it.
    public func object(forKey key: String) -> Any? {
        lock.withLock {
            arguments[key] ?? application[key] ?? global[key] ?? language[key]
                ?? registration[key]
        }
    }

    /// Every key visible through the domains, each with the value that wins.
    public func dictionaryRepresentation() -> [String: Any] {
        lock.withLock {
            registration.merging(language) { $1 }.merging(global) { $1 }
                .merging(application) { $1 }.merging(arguments) { $1 }
        }
    }

    // MARK: Writing

    /// Stores `value` in the application domain and saves it; nil removes the key. A value that
    /// is not a property list (or a URL, stored as its string) is refused with a line on stderr,
    /// as UserDefaults refuses it.
    public func set(_ value: Any?, forKey key: String) {
        guard let value else {
            removeObject(forKey: key)
            return
        }
        guard let stored = PlistValue.normalize(value) else {
            runtimeLog(
                "Preferences: cannot store a \(type(of: value)) for '\(key)': not a property-list value"
            )
            return
        }
        lock.withLock {
            application[key] = stored
            saveLocked()
        }
    }

    public func removeObject(forKey key: String) {
        lock.withLock {
            guard application.removeValue(forKey: key) != nil else { return }
            saveLocked()
        }
    }

    /// Defaults for keys no other domain has; kept in memory, never saved.
    public func register(defaults: [String: Any]) {
        let normalized = defaults.compactMapValues(PlistValue.normalize)
        lock.withLock { registration.merge(normalized) { $1 } }
    }

    /// Saves what a failed save left unsaved, then re-reads the files, picking up what another
    /// process wrote. False if the save fails again.
    @discardableResult
    public func synchronize() -> Bool {
        lock.withLock {
            if unsaved {
                saveLocked()
                if unsaved { return false }
            }
            application = Self.load(applicationURL)
            global = Self.load(globalURL)
            return true
        }
    }

    /// The saved contents of a domain: the app's bundle id or `NSGlobalDomain`.
    public func persistentDomain(forName name: String) -> [String: Any]? {
        lock.withLock {
            name == Self.globalDomain ? global : name == bundleIdentifier ? application : nil
        }
    }

    /// Replaces a domain (the app's bundle id or `NSGlobalDomain`) and saves it.
    public func setPersistentDomain(_ domain: [String: Any], forName name: String) throws {
        guard let url = url(forDomain: name) else {
            throw AppRuntimeError(
                .notFound,
                "Preferences: no domain '\(name)' (only '\(bundleIdentifier)' and \(Self.globalDomain))"
            )
        }
        let normalized = domain.compactMapValues(PlistValue.normalize)
        try lock.withLock {
            try PropertyListFile.write(normalized, to: url)
            if name == Self.globalDomain {
                global = normalized
            } else {
                application = normalized
                unsaved = false
            }
        }
    }

    private func saveLocked() {
        guard let url = applicationURL else { return }
        do {
            try PropertyListFile.write(application, to: url)
            unsaved = false
        } catch {
            unsaved = true
            runtimeLog("Preferences: \(error); the change is kept in memory until synchronize()")
        }
    }
}

/// The language domain: what NSUserDefaults answers for `AppleLanguages` and `AppleLocale`,
/// from the app's locale environment (Localization's reading of it).
enum LanguageDomain {
    static func values(_ environment: [String: String]) -> [String: Any] {
        var values: [String: Any] = [:]
        let languages = Localization.preferredLanguages(environment: environment)
        if !languages.isEmpty { values["AppleLanguages"] = languages }
        let locale = ["LC_ALL", "LC_MESSAGES", "LANG"].lazy.compactMap { environment[$0] }
            .first { !$0.isEmpty }
        if let locale, let name = locale.split(separator: ".").first.map(String.init),
            !["C", "POSIX"].contains(name), !name.isEmpty
        {
            values["AppleLocale"] = String(name.split(separator: "@")[0])
        }
        return values
    }
}
