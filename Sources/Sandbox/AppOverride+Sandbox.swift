import AppdConfig

/// What the profile compile and the cgroups take of an `[App ID]` section.
extension AppOverride {
    /// The cgroup limits of this app's instances: the policy's, with this section's CPUWeight.
    public func cgroupLimits(settings: SandboxSettings) -> CgroupLimits {
        let settings = applied(to: settings)
        return CgroupLimits(
            memoryMax: settings.memoryMax, pidsMax: settings.tasksMax, cpuWeight: cpuWeight)
    }

    /// What the profile compile needs of this section beyond its `[Sandbox]` keys (those go
    /// in through `applied(to:)`).
    public var sandboxOverride: SandboxOverride {
        SandboxOverride(
            revokedEntitlements: revokedEntitlements, cpuWeight: cpuWeight,
            environment: service.environment.map { .init(name: $0.name, value: $0.value) },
            summary: summary)
    }
}

extension AppdConfiguration {
    /// What the profile of `bundleID` is compiled with besides the app itself: `[Sandbox]` with
    /// the app's `[App ID]` keys in place of the host's, and the rest of that section.
    public func sandboxInputs(for bundleID: String) -> (
        settings: SandboxSettings, override: SandboxOverride?
    ) {
        guard let override = override(for: bundleID) else { return (sandbox, nil) }
        return (override.applied(to: sandbox), override.sandboxOverride)
    }
}
