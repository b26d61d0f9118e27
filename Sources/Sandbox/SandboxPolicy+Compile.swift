import AppBundle
import AppdConfig

/// What the host's admin changed for one app (`[App ID]` in appd.conf) beyond its `[Sandbox]`
/// keys (those arrive already applied to the `SandboxSettings` the compile is given): the
/// entitlements taken away, the cpu weight, extra environment, and the line `appd profile`
/// shows. Nothing here can grant what the app's signer did not.
public struct SandboxOverride: Sendable, Equatable {
    /// Entitlement patterns (exact, a prefix ending in `*`, or `*`) the app loses at launch.
    public var revokedEntitlements: [String]
    /// The instance cgroup's cpu.weight, 1...10000; nil: the kernel's default.
    public var cpuWeight: Int?
    /// Added to the environment last, each replacing the sandbox's variable of its name (the
    /// names the sandbox sets itself are refused where the override is read).
    public var environment: [SandboxProfile.EnvironmentVariable]
    /// `MemoryMax=64M, revoked com.apple.security.network.client`: the profile's
    /// `adminOverride`.
    public var summary: String

    public init(
        revokedEntitlements: [String] = [], cpuWeight: Int? = nil,
        environment: [SandboxProfile.EnvironmentVariable] = [], summary: String
    ) {
        self.revokedEntitlements = revokedEntitlements
        self.cpuWeight = cpuWeight
        self.environment = environment
        self.summary = summary
    }

    /// Whether `key` is revoked.
    public func revokes(_ key: String) -> Bool {
        revokedEntitlements.contains { EntitlementPattern.matches($0, key, ignoringCase: false) }
    }

    /// `entitlements` less what this override revokes.
    public func narrowed(_ entitlements: Entitlements) -> Entitlements {
        guard !revokedEntitlements.isEmpty else { return entitlements }
        return Entitlements(values: entitlements.values.filter { key, _ in !revokes(key) })
    }
}

extension SandboxPolicy {
    /// The whole compile, from explicit inputs and nothing else: the app (its entitlements,
    /// bundle, containers and uid), the settings in force for it (`[Sandbox]`, with its
    /// `[App ID]` keys applied), the admin's override, and the host's kernel. No state root, no
    /// daemon: `appd`'s launches, `appd profile` and a runtime that verified a bundle itself all
    /// get the same profile for the same inputs.
    public static func compile(
        _ app: SandboxSubject, settings: SandboxSettings, override: SandboxOverride? = nil,
        kernel: KernelLayers, hostRoot: String = "", arguments: [String] = [],
        console: Bool = false
    ) throws -> SandboxProfile {
        var app = app
        if let override {
            app.entitlements = override.narrowed(app.entitlements)
            if override.revokes(EntitlementCatalog.applicationGroups) { app.groupContainers = [] }
        }
        let policy = SandboxPolicy(settings: settings, kernel: kernel, hostRoot: hostRoot)
        var profile = try policy.profile(for: app, arguments: arguments, console: console)
        if let override {
            profile.cgroupLimits.cpuWeight = override.cpuWeight
            profile.adminOverride = override.summary
            for variable in override.environment {
                profile.environment.removeAll { $0.name == variable.name }
                profile.environment.append(variable)
            }
        }
        return profile
    }
}

extension SandboxSubject {
    /// The subject for a bundle read (and verified) by the caller, installed nowhere: the
    /// bundle container is the directory holding it. `entitlements` are the ones granted
    /// (the bundle's own when nil).
    public init(
        bundle: AppBundle, dataContainer: String, uid: UInt32, gid: UInt32,
        entitlements: Entitlements? = nil, groupContainers: [GroupContainer] = []
    ) {
        let container = bundle.path.lastIndex(of: "/").map { String(bundle.path[..<$0]) } ?? ""
        self.init(
            bundleID: bundle.info.identifier.rawValue, name: bundle.info.title,
            bundleContainer: container.isEmpty ? "/" : container, bundlePath: bundle.path,
            executable: "\(bundle.path)/\(bundle.executablePath)", dataContainer: dataContainer,
            uid: uid, gid: gid, entitlements: entitlements ?? bundle.entitlements,
            groupContainers: groupContainers, hostExecutables: bundle.info.hostExecutables)
    }
}
