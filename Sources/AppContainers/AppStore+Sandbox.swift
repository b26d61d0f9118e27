import AppBundle
import Glibc
import Sandbox

extension InstalledApp {
    /// What the sandbox policy needs to know about this app.
    public func sandboxSubject(in root: StateRoot, groups: [SandboxSubject.GroupContainer])
        throws -> SandboxSubject
    {
        guard state == .installed, let container = bundleContainer(in: root),
            let bundlePath = bundlePath(in: root), let executable
        else {
            throw AppdError(.notFound, "\(bundleID) has no installed bundle (uninstalled with --keep-data)",
                hint: "install it again to launch it")
        }
        let name = title ?? String((bundleName ?? bundleID).split(separator: ".").first ?? "app")
        return SandboxSubject(
            bundleID: bundleID, name: name, bundleContainer: container, bundlePath: bundlePath,
            executable: "\(bundlePath)/\(executable)", dataContainer: dataContainer(in: root),
            uid: uid, gid: gid, entitlements: try decodedEntitlements(), groupContainers: groups)
    }
}

extension AppStore {
    /// `logs/` under the state root (root only, 0700), opened as a directory: where `appd run`
    /// without a console has the launcher's output relay write `<id>.log` (docs/app-output.md;
    /// the app itself only gets a pipe).
    public func openLogFolder() throws -> (fd: Int32, path: String) {
        let directory = "\(root.path)/logs"
        if mkdir(directory, 0o700) != 0 && errno != EEXIST { throw AppdError.system("mkdir \(directory)") }
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw AppdError.system("open \(directory)") }
        return (fd, directory)
    }
}

extension AppStore {
    /// The profile `app` launches with on this kernel. Reads only (group containers are made at install).
    public func sandboxProfile(
        for app: InstalledApp, arguments: [String] = [], console: Bool = false,
        kernel: KernelLayers = .detect()
    ) throws -> SandboxProfile {
        let config = config
        var subject = try app.sandboxSubject(in: root, groups: groupContainers(for: app))
        var settings = config.sandbox
        // The admin's [App ID]: its limits instead of the host's, entitlements taken away.
        if let override = config.override(for: app.bundleID) {
            settings = override.applied(to: settings)
            subject.entitlements = override.narrowed(subject.entitlements)
            if override.revokes(EntitlementCatalog.applicationGroups) { subject.groupContainers = [] }
        }
        let policy = SandboxPolicy(settings: settings, kernel: kernel)
        var profile = try policy.profile(for: subject, arguments: arguments, console: console)
        if let override = config.override(for: app.bundleID) {
            profile.cgroupLimits = override.cgroupLimits(settings: config.sandbox)
            profile.adminOverride = override.summary
            // Environment= names were checked when the file was read: none the sandbox sets.
            for variable in override.service.environment {
                profile.environment.removeAll { $0.name == variable.name }
                profile.environment.append(.init(name: variable.name, value: variable.value))
            }
        }
        return profile
    }
}
