import AppBundle
import Sandbox

/// `[App com.example.x]`: what the host's admin changes for one app without re-signing it, as
/// `flatpak override` does: its limits, and entitlements taken away. Nothing here can grant what
/// the app's signer did not.
public struct AppOverride: Sendable, Equatable {
    /// `[Sandbox]` keys this section may set for the one app, as text checked at parse time.
    public static let sandboxKeys = ["MemoryMax", "TasksMax", "OpenFilesMax"]
    public static let keys = sandboxKeys + ["RevokeEntitlements"]

    /// Key and value, in file order (the last one of a key wins, as in `[Sandbox]`).
    public var sandbox: [(key: String, value: String)] = []
    /// Entitlement patterns (exact, a prefix ending in `*`, or `*`) the app loses at launch.
    public var revokedEntitlements: [String] = []

    public init() {}

    public static func == (a: Self, b: Self) -> Bool {
        a.sandbox.map { "\($0.key)=\($0.value)" } == b.sandbox.map { "\($0.key)=\($0.value)" }
            && a.revokedEntitlements == b.revokedEntitlements
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

    /// `entitlements` less what this section revokes.
    public func narrowed(_ entitlements: Entitlements) -> Entitlements {
        guard !revokedEntitlements.isEmpty else { return entitlements }
        return Entitlements(values: entitlements.values.filter { key, _ in !revokes(key) })
    }

    public func revokes(_ key: String) -> Bool {
        revokedEntitlements.contains { SigningPolicy.matches($0, key, ignoringCase: false) }
    }

    /// What an admin reads in `appd profile`: `MemoryMax=1G, revoked com.apple.security.network.client`.
    public var summary: String {
        (sandbox.map { "\($0.key)=\($0.value)" } + revokedEntitlements.map { "revoked \($0)" })
            .joined(separator: ", ")
    }
}

extension AppdConfiguration {
    /// The override of `bundleID`, if the admin wrote one (ids compare without regard to case).
    public func override(for bundleID: String) -> AppOverride? { apps[bundleID.lowercased()] }

    /// `[App ID]` opens a section for that bundle id.
    mutating func addApp(_ section: String, place: String) throws -> String {
        let id = section.dropFirst("App".count).trimmingCharacters(in: .whitespaces)
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
        func bad(_ expected: String) -> AppdError {
            AppdError(.invalidConfig, "\(place): [\(section)] \(key)=\(value) is not \(expected)")
        }
        switch key {
        case "RevokeEntitlements":
            guard let patterns = SigningPolicy.validPatterns(value) else {
                throw bad("a list of patterns (exact, a prefix ending in *, or *)")
            }
            override.revokedEntitlements = patterns
        case _ where AppOverride.sandboxKeys.contains(key):
            var scratch = sandbox
            if case .invalid(let expected) = scratch.set(
                key: key, value: value, parseSize: Self.parseSize)
            {
                throw bad(expected)
            }
            override.sandbox.append((key, value))
        default:
            throw AppdError(
                .invalidConfig, "\(place): unknown key \(key) in [\(section)]",
                hint: "known keys: " + AppOverride.keys.joined(separator: ", "))
        }
        apps[id] = override
    }
}
