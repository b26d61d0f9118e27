import AppContainers

extension Supervisor {
    /// A reloaded appd.conf (the store already holds it): later launches use its launcher and
    /// `[Supervisor]` settings (grace period, instances kept); running instances keep their
    /// sandbox, cgroup and limits. The caller has checked that the launcher exists and kept
    /// `CgroupParent` and `LogMaxBytes`, which only a restart changes.
    public func applySettings(_ config: AppdConfiguration) throws {
        launcher = try SandboxLaunch.findLauncher(configured: config.sandbox.launcher)
        settings = config.supervisor
    }
}
