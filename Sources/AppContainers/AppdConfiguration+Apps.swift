import AppBundle
import AppdAPI
import AppdBase
import Sandbox

/// `[App com.example.x]`: what the host's admin changes for one app without re-signing it, as
/// `flatpak override` does: its limits, the host loopback ports it may reach (`LoopbackPorts=`,
/// the admin's own grant, as in `[Sandbox]`), and entitlements taken away. Nothing here can
/// grant an entitlement the app's signer did not.
public struct AppOverride: Sendable, Equatable {
    /// `[Sandbox]` keys this section may set for the one app, as text checked at parse time.
    public static let sandboxKeys = [
        "MemoryMax", "TasksMax", "OpenFilesMax", "DataQuota", "LoopbackPorts",
    ]
    public static let keys =
        sandboxKeys + ["CPUWeight", "BackgroundModes", "RevokeEntitlements"] + ServiceSettings.keys

    /// Key and value, in file order (the last one of a key wins, as in `[Sandbox]`).
    public var sandbox: [(key: String, value: String)] = []
    /// `CPUWeight=`: the instance cgroup's cpu.weight (v2; v1 cpu.shares = weight * 1024 / 100),
    /// 1...10000; nil leaves the kernel's default (100).
    public var cpuWeight: Int?
    /// `BackgroundModes=`: the only `UIBackgroundModes` values that may keep this app running in
    /// the background, on top of `[Lifecycle] AllowedBackgroundModes` (an override only takes
    /// away). Empty: none; nil: the host's list.
    public var backgroundModes: [String]?
    /// Entitlement patterns (exact, a prefix ending in `*`, or `*`) the app loses at launch.
    public var revokedEntitlements: [String] = []
    /// `RunAtLoad=`, `KeepAlive=`, `Arguments=`, `Environment=`: how appd runs it as a service.
    public var service = ServiceSettings()

    public init() {}

    public static func == (a: Self, b: Self) -> Bool {
        a.lines.map { "\($0.key)=\($0.value)" } == b.lines.map { "\($0.key)=\($0.value)" }
    }

    /// The section's settings as `Key=Value` lines, one per key (the last value of a key wins),
    /// in the order of `keys`: what `appd override` writes and what compares two overrides.
    public var lines: [(key: String, value: String)] {
        var result: [(key: String, value: String)] = []
        for key in Self.sandboxKeys {
            if let value = sandbox.last(where: { $0.key == key })?.value {
                result.append((key, value))
            }
        }
        if let cpuWeight { result.append(("CPUWeight", String(cpuWeight))) }
        if let backgroundModes {
            result.append(("BackgroundModes", backgroundModes.joined(separator: " ")))
        }
        if !revokedEntitlements.isEmpty {
            result.append(("RevokeEntitlements", revokedEntitlements.joined(separator: " ")))
        }
        return result + service.lines
    }

    /// The value of one sandbox key this section sets, if any.
    public func sandboxValue(_ key: String) -> String? {
        sandbox.last(where: { $0.key == key })?.value
    }

    /// The cgroup limits of this app's instances: the policy's, with this section's CPUWeight.
    public func cgroupLimits(settings: SandboxSettings) -> CgroupLimits {
        let settings = applied(to: settings)
        return CgroupLimits(
            memoryMax: settings.memoryMax, pidsMax: settings.tasksMax, cpuWeight: cpuWeight)
    }

    /// `modes` (the app's `UIBackgroundModes` the host allows) less what this section takes away.
    public func narrowedBackgroundModes(_ modes: [String]) -> [String] {
        guard let backgroundModes else { return modes }
        return modes.filter(backgroundModes.contains)
    }

    /// `settings` with this app's values in place of the host's.
    public func applied(to settings: SandboxSettings) -> SandboxSettings {
        var settings = settings
        for (key, value) in sandbox {
            // Checked when the file was read; a value refused here cannot happen.
            _ = settings.set(key: key, value: value, parseSize: AppdConfiguration.parseSize)
        }
        return settings
    }

    /// What the profile compile needs of this section beyond its `[Sandbox]` keys (those go
    /// in through `applied(to:)`).
    public var sandboxOverride: SandboxOverride {
        SandboxOverride(
            revokedEntitlements: revokedEntitlements, cpuWeight: cpuWeight,
            environment: service.environment.map { .init(name: $0.name, value: $0.value) },
            summary: summary)
    }

    public func revokes(_ key: String) -> Bool {
        revokedEntitlements.contains { EntitlementPattern.matches($0, key, ignoringCase: false) }
    }

    /// What an admin reads in `appd profile`: `MemoryMax=64M, revoked com.apple.security.network.client`.
    public var summary: String {
        let settings = lines.filter { $0.key != "RevokeEntitlements" }.map { line in
            line.key == "BackgroundModes" && line.value.isEmpty
                ? "BackgroundModes=none" : "\(line.key)=\(line.value)"
        }
        return (settings + revokedEntitlements.map { "revoked \($0)" }).joined(separator: ", ")
    }
}

extension AppdConfiguration {
    /// The override of `bundleID`, if the admin wrote one (ids compare without regard to case).
    public func override(for bundleID: String) -> AppOverride? { apps[bundleID.lowercased()] }

    /// `[App ID]` opens a section for that bundle id.
    mutating func addApp(_ section: String, place: String) throws -> String {
        let id = section.dropFirst("App".count).trimmingWhitespace()
        do {
            _ = try BundleIdentifier(validating: id)
        } catch {
            throw AppdError(
                .invalidConfig,
                "\(place): [\(section)] does not name a bundle id: \(error.message)",
                hint: "write it as [App com.example.notes]")
        }
        guard apps[id.lowercased()] == nil else {
            throw AppdError(
                .invalidConfig, "\(place): [App \(id)] appears twice",
                hint: "merge the two sections")
        }
        apps[id.lowercased()] = AppOverride()
        return id.lowercased()
    }

    mutating func setApp(_ id: String, section: String, key: String, value: String, place: String)
        throws
    {
        guard var override = apps[id] else { return }
        switch override.set(key: key, value: value, host: sandbox) {
        case .ok:
            apps[id] = override
        case .invalid(let expected):
            throw AppdError(
                .invalidConfig, "\(place): [\(section)] \(key)=\(value) is not \(expected)")
        case .unknownKey:
            throw AppdError(
                .invalidConfig, "\(place): unknown key \(key) in [\(section)]",
                hint: "known keys: " + AppOverride.keys.joined(separator: ", "))
        }
    }
}

extension AppOverride {
    /// Sets `key` from its text as appd.conf and `appd override` write it; `host` is the
    /// `[Sandbox]` the values are checked against.
    public mutating func set(key: String, value: String, host: SandboxSettings)
        -> SandboxSettings.SettingResult
    {
        switch key {
        case "RevokeEntitlements":
            guard let patterns = SigningPolicy.validPatterns(value) else {
                return .invalid("a list of patterns (exact, a prefix ending in *, or *)")
            }
            revokedEntitlements = patterns
        case "CPUWeight":
            guard let weight = Int(value), (1...10000).contains(weight) else {
                return .invalid("a weight from 1 to 10000 (100 is the kernel's default)")
            }
            cpuWeight = weight
        case "BackgroundModes":
            let modes = value.split(separator: " ").map(String.init)
            guard modes.allSatisfy(LifecycleSettings.knownBackgroundModes.contains) else {
                return .invalid(
                    "a space-separated list of "
                        + LifecycleSettings.knownBackgroundModes.joined(separator: ", ")
                        + " (empty: none)")
            }
            backgroundModes = modes
        case _ where ServiceSettings.keys.contains(key):
            return service.set(key: key, value: value)
        case _ where Self.sandboxKeys.contains(key):
            var scratch = host
            let result = scratch.set(key: key, value: value, parseSize: AppdConfiguration.parseSize)
            guard result == .ok else { return result }
            sandbox.removeAll { $0.key == key }
            sandbox.append((key, value))
        default:
            return .unknownKey
        }
        return .ok
    }

    /// Drops `key`: the host's value applies again.
    public mutating func unset(key: String) {
        switch key {
        case "RevokeEntitlements": revokedEntitlements = []
        case "CPUWeight": cpuWeight = nil
        case "BackgroundModes": backgroundModes = nil
        case _ where ServiceSettings.keys.contains(key): service.unset(key: key)
        default: sandbox.removeAll { $0.key == key }
        }
    }
}
