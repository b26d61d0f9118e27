import AppBundle
import AppdBase
import Foundation

/// The settings of `appd.conf`: systemd-style INI (`[Section]`, `Key=Value`, `#` comments),
/// the format Linux admins already edit for journald and logind. `config/appd.conf` in the
/// repository documents every key with its default.
///
/// Unknown sections and keys are errors, not warnings: a typo in a security setting must not
/// silently leave the default in force.
public struct AppdConfiguration: Sendable, Equatable {
    /// Where appd looks when neither `--config` nor `APPD_CONFIG` names a file. Missing is fine
    /// (built-in defaults apply); a file named explicitly must exist.
    public static let defaultPath = "/etc/appd/appd.conf"
    public static let defaultRoot = "/var/lib/appd"

    public var bundleLimits = BundleLimits()
    /// uids (and gids, the same numbers) handed to apps. Above the ranges Debian and systemd
    /// use for accounts (<60000), DynamicUser (61184-65519) and nspawn containers
    /// (524288-1879048191), below 2^31 so no tool mistakes them for negative numbers.
    public var uidRange: ClosedRange<UInt32> = 2_000_000_000...2_000_099_999
    /// gids handed to application groups: a range of their own, so that no signer's groups can
    /// use up the uids apps need (and the other way round). Right above `uidRange`.
    public var groupRange: ClosedRange<UInt32> = 2_000_100_000...2_000_199_999
    /// Application groups one app may use.
    public var maxGroupsPerApp = 16
    /// Application groups bound to one key at once (unsigned apps count as one key).
    public var maxGroupsPerSigner = 256
    /// `[Sandbox]`: what every app's sandbox is built from.
    public var sandbox = SandboxSettings()
    /// `[API]`: the daemon's socket and who may use it.
    public var api = APISettings()
    /// `[Supervisor]`: running instances.
    public var supervisor = SupervisorSettings()
    /// `[Lifecycle]`: states, background time, watchdog, memory budget (docs/lifecycle.md).
    public var lifecycle = LifecycleSettings()
    /// `[App ID]` sections, by bundle id (as the section spells it; found in any case).
    public var apps: [AppID: AppOverride] = [:]
    /// `[Signing]` and `[Signer NAME]`: trusted keys and what each may grant.
    public var signing = SigningPolicy()
    /// `[Storage]`: reclaiming Caches when the state root's filesystem runs short.
    public var storage = StorageSettings()
    /// `[OCI]`: the hooks appd-oci may run.
    public var oci = OCISettings()
    /// `[Handlers]`: the app that opens a URL scheme or a document type, chosen by the admin.
    public var handlers = HandlerSettings()

    public init() {}

    /// Reads `path`; `explicit` says whether the user named it (then it must exist).
    /// Then the `[Signer]` drop-ins of `signers.d/` beside it (AppdConfiguration+SignersD), or
    /// of `signers` instead (`appd verify --signers DIR`: a fleet's drop-ins checked before
    /// they are shipped; it must exist).
    public static func load(path: String, explicit: Bool, signers: String? = nil) throws
        -> AppdConfiguration
    {
        var config = AppdConfiguration()
        if FileManager.default.fileExists(atPath: path) {
            guard let data = FileManager.default.contents(atPath: path),
                let text = String(data: data, encoding: .utf8)
            else {
                throw AppdError(.invalidConfig, "config file \(path) is unreadable or not UTF-8")
            }
            config = try parse(text, file: path)
        } else if explicit {
            throw AppdError(.invalidConfig, "config file \(path) does not exist")
        }
        if let signers {
            var info = stat()
            guard stat(signers, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
                throw AppdError(.invalidConfig, "the signers folder \(signers) is not a folder")
            }
            try addSignerDropIns(to: &config, in: signers)
        } else {
            try addSignerDropIns(
                to: &config,
                in: (path as NSString).deletingLastPathComponent + "/" + signersDirectoryName)
        }
        return config
    }

    public static func parse(_ text: String, file: String) throws -> AppdConfiguration {
        var config = AppdConfiguration()
        var header = ""
        var section: ConfigKey.Section?
        // The lowercased bundle id while in an [App ID] section.
        var app: AppID?
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false)
            .enumerated()
        {
            let line = rawLine.trimmingWhitespace()
            let place = "\(file):\(index + 1)"
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]") else {
                    throw AppdError(.invalidConfig, "\(place): section header '\(line)' has no ']'")
                }
                header = String(line.dropFirst().dropLast())
                app = nil
                let first = header.split(separator: " ", maxSplits: 1).first.map(String.init) ?? ""
                section = ConfigKey.Section(rawValue: first)
                switch section {
                case .app: app = try config.addApp(header, place: place)
                case .signer: try config.addSigner(header, place: place)
                case _ where first != header: section = nil
                default: break
                }
                guard section != nil else {
                    let known = ConfigKey.Section.allCases.map {
                        $0 == .app
                            ? "[App ID]" : $0 == .signer ? "[Signer NAME]" : "[\($0.rawValue)]"
                    }
                    throw AppdError(
                        .invalidConfig, "\(place): unknown section [\(header)]",
                        hint: "known sections: " + known.joined(separator: ", "))
                }
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw AppdError(.invalidConfig, "\(place): expected Key=Value, found '\(line)'")
            }
            let name = line[..<equals].trimmingWhitespace()
            let value = line[line.index(after: equals)...].trimmingWhitespace()
            guard let section else {
                throw AppdError(.invalidConfig, "\(place): '\(name)' is outside any [Section]")
            }
            guard let key = ConfigKey.find(name, in: section) else {
                throw AppdError(
                    .invalidConfig, "\(place): unknown key \(name) in [\(header)]",
                    hint: ConfigKey.hint(unknown: name, in: section))
            }
            do throws(ConfigProblem) {
                if let app, let rule = key.app {
                    try rule.set(&config.apps[app, default: AppOverride()], value)
                } else if let set = key.host {
                    try set(&config, value, ConfigPlace(file: file, section: header))
                }
            } catch {
                throw error.naming(place: place, section: header, key: name, value: value)
            }
        }
        guard config.api.reservedConnections < config.api.maxConnections else {
            throw AppdError(
                .invalidConfig,
                "\(file): [API] ReservedConnections=\(config.api.reservedConnections) leaves nothing of MaxConnections=\(config.api.maxConnections) for other users",
                hint: "make ReservedConnections smaller than MaxConnections")
        }
        guard !config.uidRange.overlaps(config.groupRange) else {
            throw AppdError(
                .invalidConfig,
                "\(file): [Users] GroupRange=\(config.groupRange.lowerBound)-\(config.groupRange.upperBound) overlaps UIDRange=\(config.uidRange.lowerBound)-\(config.uidRange.upperBound)",
                hint: "application groups need gids of their own, apart from the apps' uids")
        }
        if let keyless = config.signing.signers.first(where: { $0.key == nil }) {
            throw AppdError(.invalidConfig, "\(file): [Signer \(keyless.name)] has no Key=")
        }
        return config
    }

    /// `[Signer NAME]` opens a new signer; the keys that follow fill it in.
    mutating func addSigner(_ section: String, place: String) throws {
        let name = section.dropFirst("Signer".count).trimmingWhitespace()
        guard !name.isEmpty, !name.contains(" ") else {
            throw AppdError(
                .invalidConfig,
                "\(place): [\(section)] needs one word as the signer's name, like [Signer example]")
        }
        guard !signing.signers.contains(where: { $0.name == name }) else {
            throw AppdError(.invalidConfig, "\(place): [Signer \(name)] appears twice")
        }
        signing.signers.append(SigningPolicy.Signer(name: name))
    }

    /// Every section and the keys it accepts, as appd.conf(5) must document them
    /// (`[Signer NAME]` and `[App ID]` by their first word).
    public static var documentedKeys: [(section: String, keys: [String])] {
        ConfigKey.Section.allCases.map { ($0.rawValue, ConfigKey.keys(of: $0).map(\.name)) }
    }

}

extension ConfigProblem {
    /// The error of a bad value on one line: `t.conf:2: [Bundle] MaxFiles=-3 is not a positive
    /// whole number`.
    func naming(place: String, section: String, key: String, value: String) -> AppdError {
        switch self {
        case .notA(let expected):
            AppdError(.invalidConfig, "\(place): [\(section)] \(key)=\(value) is not \(expected)")
        case .says(let sentence): AppdError(.invalidConfig, "\(place): \(sentence)")
        }
    }
}
