import AppBundle
import AppdBase

/// What this kernel's layers mean for each kind of app, for `appd doctor`: the policy itself
/// is asked (a profile compiled for a stand-in app of each network kind), so the report cannot
/// drift from what a launch does.
public struct SandboxLayerSummary: Sendable, Codable, Equatable {
    /// `none`, `network.client` or `network.server`.
    public var apps: String
    /// Whether such an app launches with this kernel and these settings.
    public var launches: Bool
    /// Layers that are reduced (another layer closes the gap), weakened (allowed by
    /// `WeakerModes=`), or, when it does not launch, why not.
    public var notes: [String]
}

extension SandboxPolicy {
    public func kernelSummary() -> [SandboxLayerSummary] {
        let kinds: [(String, [String: PlistValue])] = [
            ("no network", [:]),
            ("network.client", ["com.apple.security.network.client": .bool(true)]),
            ("network.server", ["com.apple.security.network.server": .bool(true)]),
        ]
        return kinds.map { name, entitlements in
            var values = entitlements
            values["com.apple.security.app-sandbox"] = .bool(true)
            let subject = SandboxSubject(
                bundleID: "com.example.layers", name: "Layers", bundleContainer: "/nonexistent/B",
                bundlePath: "/nonexistent/B/Layers.app",
                executable: "/nonexistent/B/Layers.app/Layers",
                dataContainer: "/nonexistent/D", uid: 65534, gid: 65534,
                entitlements: Entitlements(values: values))
            do {
                let profile = try profile(for: subject)
                return SandboxLayerSummary(
                    apps: name, launches: true,
                    notes: profile.reducedLayers.map { "reduced: " + $0 }
                        + profile.weakenedLayers.map { "weakened: " + $0 })
            } catch let error as AppdError {
                return SandboxLayerSummary(apps: name, launches: false, notes: [error.description])
            } catch {
                return SandboxLayerSummary(apps: name, launches: false, notes: ["\(error)"])
            }
        }
    }
}
