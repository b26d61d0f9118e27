import AppBundle
import AppdAPI
import AppdBase
import Foundation
import Sandbox

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
    /// `[App ID]` sections, by lowercased bundle id.
    public var apps: [String: AppOverride] = [:]
    /// `[Signing]` and `[Signer NAME]`: trusted keys and what each may grant.
    public var signing = SigningPolicy()
    /// `[Storage]`: reclaiming Caches when the state root's filesystem runs short.
    public var storage = StorageSettings()
    /// `[OCI]`: the hooks appd-oci may run.
    public var oci = OCISettings()

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
        var section = ""
        // The lowercased bundle id while in an [App ID] section.
        var app: String?
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
                section = String(line.dropFirst().dropLast())
                app = nil
                if section == "App" || section.hasPrefix("App ") {
                    app = try config.addApp(section, place: place)
                    continue
                }
                if section == "Signer" || section.hasPrefix("Signer ") {
                    try config.addSigner(section, place: place)
                    continue
                }
                guard
                    [
                        "Bundle", "Users", "Sandbox", "API", "Supervisor", "Lifecycle", "Signing",
                        "Storage", "OCI",
                    ]
                    .contains(section)
                else {
                    throw AppdError(
                        .invalidConfig, "\(place): unknown section [\(section)]",
                        hint:
                            "known sections: [Bundle], [Users], [Sandbox], [API], [Supervisor], [Lifecycle], [Storage], [OCI], [Signing], [Signer NAME], [App ID]"
                    )
                }
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw AppdError(.invalidConfig, "\(place): expected Key=Value, found '\(line)'")
            }
            let key = line[..<equals].trimmingWhitespace()
            let value = line[line.index(after: equals)...].trimmingWhitespace()
            if let app {
                try config.setApp(app, section: section, key: key, value: value, place: place)
            } else {
                try config.set(section: section, key: key, value: value, place: place, file: file)
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

    private mutating func set(
        section: String, key: String, value: String, place: String, file: String
    ) throws {
        func bad(_ expected: String) -> AppdError {
            AppdError(.invalidConfig, "\(place): [\(section)] \(key)=\(value) is not \(expected)")
        }
        func count() throws -> Int {
            guard let n = Int(value), n > 0 else { throw bad("a positive whole number") }
            return n
        }
        func bytes() throws -> Int64 {
            guard let n = Self.parseSize(value), n > 0 else {
                throw bad("a size (a number with an optional K, M, G or T suffix)")
            }
            return n
        }
        func access() throws -> AccessList {
            do { return try AccessList(value) } catch {
                throw bad("a list of root, *, @group or user names ('\(error.word)')")
            }
        }
        switch (section, key) {
        case ("Bundle", "MaxFiles"): bundleLimits.maxFiles = try count()
        case ("Bundle", "MaxTotalBytes"): bundleLimits.maxTotalBytes = try bytes()
        case ("Bundle", "MaxDepth"): bundleLimits.maxDepth = try count()
        case ("Bundle", "MaxPathLength"): bundleLimits.maxPathLength = try count()
        case ("Bundle", "MaxInfoPlistBytes"): bundleLimits.maxInfoPlistBytes = Int(try bytes())
        case ("Bundle", "MaxEntitlementsBytes"):
            bundleLimits.maxEntitlementsBytes = Int(try bytes())
        case ("Users", "UIDRange"), ("Users", "GroupRange"):
            let parts = value.split(separator: "-").map {
                UInt32($0.trimmingWhitespace())
            }
            guard parts.count == 2, let low = parts[0], let high = parts[1], low <= high else {
                throw bad("a range 'FIRST-LAST'")
            }
            guard low >= 1000 else {
                throw AppdError(
                    .invalidConfig,
                    "\(place): \(key) starts at \(low); ids below 1000 belong to the system")
            }
            if key == "UIDRange" { uidRange = low...high } else { groupRange = low...high }
        case ("Users", "MaxGroupsPerApp"): maxGroupsPerApp = try count()
        case ("Users", "MaxGroupsPerSigner"): maxGroupsPerSigner = try count()
        case ("Users", _):
            throw AppdError(
                .invalidConfig, "\(place): unknown key \(key) in [Users]",
                hint: "known keys: " + Self.usersKeys.joined(separator: ", "))
        case ("Sandbox", _):
            switch sandbox.set(key: key, value: value, parseSize: Self.parseSize) {
            case .ok: break
            case .invalid(let expected): throw bad(expected)
            case .unknownKey:
                throw AppdError(
                    .invalidConfig, "\(place): unknown key \(key) in [Sandbox]",
                    hint: "known keys: " + SandboxSettings.keys.joined(separator: ", "))
            }
        case ("API", "Socket"):
            guard value.isEmpty || value.hasPrefix("/") else { throw bad("an absolute path") }
            api.socket = value
        case ("API", "SocketMode"):
            guard let mode = mode_t(value, radix: 8), mode <= 0o777 else {
                throw bad("an octal mode like 0660")
            }
            api.socketMode = mode
        case ("API", "SocketGroup"): api.socketGroup = value
        case ("API", "ReadAllowed"): api.readAllowed = try access()
        case ("API", "ControlAllowed"): api.controlAllowed = try access()
        case ("API", "AdminAllowed"): api.adminAllowed = try access()
        case ("API", "MaxRequestBytes"): api.maxRequestBytes = try bytes()
        case ("API", "MaxConnections"): api.maxConnections = try count()
        case ("API", "MaxConnectionsPerUser"): api.maxConnectionsPerUser = try count()
        case ("API", "MaxStreamsPerUser"): api.maxStreamsPerUser = try count()
        case ("API", "RequestTimeout"):
            guard let n = Int(value.hasSuffix("s") ? String(value.dropLast()) : value), n > 0,
                n <= 86400
            else {
                throw bad("a number of seconds (1-86400)")
            }
            api.requestTimeout = n
        case ("API", "ReservedConnections"):
            guard let n = Int(value), n >= 0 else { throw bad("a whole number (0 or more)") }
            api.reservedConnections = n
        case ("API", _):
            throw AppdError(
                .invalidConfig, "\(place): unknown key \(key) in [API]",
                hint: "known keys: " + APISettings.keys.joined(separator: ", "))
        case ("Supervisor", "TerminateGracePeriod"):
            guard let seconds = Double(value.hasSuffix("s") ? String(value.dropLast()) : value),
                seconds >= 0, seconds <= 3600
            else { throw bad("a number of seconds (0-3600)") }
            supervisor.terminateGracePeriod = seconds
        case ("Supervisor", "LogMaxBytes"): supervisor.logMaxBytes = try bytes()
        case ("Supervisor", "KeepExited"): supervisor.keepExited = try count()
        case ("Supervisor", "CgroupParent"): supervisor.cgroupParent = value
        case ("Supervisor", "MaxInstances"): supervisor.maxInstances = try count()
        case ("Supervisor", "MaxInstancesPerUser"): supervisor.maxInstancesPerUser = try count()
        case ("Supervisor", "MaxInstancesPerApp"): supervisor.maxInstancesPerApp = try count()
        case ("Supervisor", "DenialLog"):
            switch value.lowercased() {
            case "yes", "true", "1", "on": supervisor.denialLog = true
            case "no", "false", "0", "off": supervisor.denialLog = false
            default: throw bad("yes or no")
            }
        case ("Supervisor", _):
            throw AppdError(
                .invalidConfig, "\(place): unknown key \(key) in [Supervisor]",
                hint: "known keys: " + SupervisorSettings.keys.joined(separator: ", "))
        case ("Lifecycle", _):
            switch lifecycle.set(key: key, value: value, parseSize: Self.parseSize) {
            case .ok: break
            case .invalid(let expected): throw bad(expected)
            case .unknownKey:
                throw AppdError(
                    .invalidConfig, "\(place): unknown key \(key) in [Lifecycle]",
                    hint: "known keys: " + LifecycleSettings.keys.joined(separator: ", "))
            }
        case ("Storage", "ReclaimCachesBelow"):
            guard let level = StorageSettings.Level(value, parseSize: Self.parseSize) else {
                throw bad(
                    "a free-space level: a share of the filesystem from 1% to 99% (10%) or a size (2G)"
                )
            }
            storage.reclaimCachesBelow = level
        case ("Storage", "BackupMaxBytes"):
            storage.backupMaxBytes = try bytes()
        case ("Storage", _):
            throw AppdError(
                .invalidConfig, "\(place): unknown key \(key) in [Storage]",
                hint: "known keys: " + StorageSettings.keys.joined(separator: ", "))
        case ("OCI", "Hooks"):
            let entries = value.split(whereSeparator: { $0 == " " || $0 == "\t" }).map {
                HookRule(parsing: String($0))
            }
            guard entries.allSatisfy({ $0 != nil }), entries.count <= OCISettings.maximumHooks
            else {
                throw bad(
                    "entries PATH[:ARGV0[:NAME,NAME]], space-separated, at most \(OCISettings.maximumHooks): absolute paths, variable names never the loader's (LD_*, GCONV_PATH, GLIBC_TUNABLES...)"
                )
            }
            oci.hooks = entries.compactMap { $0 }
        case ("OCI", "MemoryMax"): oci.memoryMax = value.isEmpty ? nil : try bytes()
        case ("OCI", "TasksMax"): oci.tasksMax = value.isEmpty ? nil : try count()
        case ("OCI", _):
            throw AppdError(
                .invalidConfig, "\(place): unknown key \(key) in [OCI]",
                hint: "known keys: " + OCISettings.keys.joined(separator: ", "))
        case ("Signing", _):
            try setSigning(section: section, key: key, value: value, place: place, file: file)
        case _ where section.hasPrefix("Signer "):
            try setSigning(section: section, key: key, value: value, place: place, file: file)
        case ("", _):
            throw AppdError(.invalidConfig, "\(place): '\(key)' is outside any [Section]")
        default:
            throw AppdError(.invalidConfig, "\(place): unknown key \(key) in [\(section)]")
        }
    }

    /// Every section and the keys it accepts, as appd.conf(5) must document them
    /// (`[Signer NAME]` and `[App ID]` by their first word).
    public static let documentedKeys: [(section: String, keys: [String])] = [
        ("Bundle", bundleKeys), ("Users", usersKeys), ("Sandbox", SandboxSettings.keys),
        ("API", APISettings.keys), ("Supervisor", SupervisorSettings.keys),
        ("Lifecycle", LifecycleSettings.keys), ("Storage", StorageSettings.keys),
        ("OCI", OCISettings.keys), ("Signing", SigningPolicy.signingKeys),
        ("Signer", SigningPolicy.signerKeys), ("App", AppOverride.keys),
    ]
    static let usersKeys = ["UIDRange", "GroupRange", "MaxGroupsPerApp", "MaxGroupsPerSigner"]
    static let bundleKeys = [
        "MaxFiles", "MaxTotalBytes", "MaxDepth", "MaxPathLength", "MaxInfoPlistBytes",
        "MaxEntitlementsBytes",
    ]

    /// `4096`, `64K`, `300M`, `4G`, `1T` (powers of 1024).
    static func parseSize(_ text: String) -> Int64? {
        let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        guard let last = text.last else { return nil }
        if let unit = units[Character(last.uppercased())] {
            guard let n = Int64(text.dropLast()), n <= Int64.max / unit else { return nil }
            return n * unit
        }
        return Int64(text)
    }
}
