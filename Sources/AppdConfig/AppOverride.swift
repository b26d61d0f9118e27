import AppBundle
import AppdBase

/// `[App com.example.x]`: what the host's admin changes for one app without re-signing it, as
/// `flatpak override` does: its limits, the host loopback ports it may reach (`LoopbackPorts=`,
/// the admin's own grant, as in `[Sandbox]`), and entitlements taken away. Nothing here can
/// grant an entitlement the app's signer did not.
public struct AppOverride: Sendable, Equatable {
    /// The keys this section may set, in the order `appd override` writes them.
    public static var keys: [String] { ConfigKey.keys(of: .app).map(\.name) }

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
    /// `MinimumFetchInterval=`: the shortest background fetch interval this app gets, in place
    /// of `[Lifecycle] MinimumFetchInterval`; nil: the host's.
    public var minimumFetchInterval: Double?

    public init() {}

    public static func == (a: Self, b: Self) -> Bool {
        a.lines.map { "\($0.key)=\($0.value)" } == b.lines.map { "\($0.key)=\($0.value)" }
    }

    /// The section's settings as `Key=Value` lines, one per key (the last value of a key wins),
    /// in the order of `keys`: what `appd override` writes and what compares two overrides.
    public var lines: [(key: String, value: String)] {
        ConfigKey.keys(of: .app).compactMap { key in
            key.app?.written(self).map { (key.name, $0) }
        }
    }

    /// The value of one sandbox key this section sets, if any.
    public func sandboxValue(_ key: String) -> String? {
        sandbox.last(where: { $0.key == key })?.value
    }

    /// `modes` (the app's `UIBackgroundModes` the host allows) less what this section takes away.
    public func narrowedBackgroundModes(_ modes: [String]) -> [String] {
        guard let backgroundModes else { return modes }
        return modes.filter(backgroundModes.contains)
    }

    /// `settings` with this app's values in place of the host's.
    public func applied(to settings: SandboxSettings) -> SandboxSettings {
        var config = AppdConfiguration()
        config.sandbox = settings
        for (key, value) in sandbox {
            // Checked when the section was read; a value refused here cannot happen.
            try? ConfigKey.find(key, in: .sandbox)?.host?(
                &config, value, ConfigPlace(file: "", section: "Sandbox"))
        }
        return config.sandbox
    }

    public func revokes(_ key: String) -> Bool {
        revokedEntitlements.contains { EntitlementPattern.matches($0, key, ignoringCase: false) }
    }

    /// The shortest background fetch interval the app gets under `lifecycle`.
    public func fetchBound(_ lifecycle: LifecycleSettings) -> Double {
        minimumFetchInterval ?? lifecycle.minimumFetchInterval
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
    /// The override of `app`, if the admin wrote one (ids compare without regard to case).
    public func override(for app: AppID) -> AppOverride? { apps[app] }

    /// The same for a bundle id as written.
    public func override(for bundleID: String) -> AppOverride? { override(for: AppID(bundleID)) }

    /// `[App ID]` opens a section for that bundle id.
    mutating func addApp(_ section: String, place: String) throws -> AppID {
        let id = section.dropFirst("App".count).trimmingWhitespace()
        do {
            _ = try BundleIdentifier(validating: id)
        } catch {
            throw AppdError(
                .invalidConfig,
                "\(place): [\(section)] does not name a bundle id: \(error.message)",
                hint: "write it as [App com.example.notes]")
        }
        let key = AppID(id)
        guard apps[key] == nil else {
            throw AppdError(
                .invalidConfig, "\(place): [App \(id)] appears twice",
                hint: "merge the two sections")
        }
        apps[key] = AppOverride()
        return key
    }

}

extension AppOverride {
    /// Sets `key` from its text as appd.conf and `appd override` write it.
    public mutating func set(key: String, value: String) throws(ConfigProblem) {
        guard let rule = ConfigKey.find(key, in: .app)?.app else {
            throw .says("\(key) is not a key of [App ID]")
        }
        try rule.set(&self, value)
    }

    /// Drops `key`: the host's value applies again.
    public mutating func unset(key: String) {
        ConfigKey.find(key, in: .app)?.app?.unset(&self)
    }
}
