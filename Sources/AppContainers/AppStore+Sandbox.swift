import AppBundle
import AppdBase
import AppdConfig
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
            throw AppdError(
                .notFound, "\(bundleID) has no installed bundle (uninstalled with --keep-data)",
                hint: "install it again to launch it")
        }
        let name = title ?? String((bundleName ?? bundleID).split(separator: ".").first ?? "app")
        return SandboxSubject(
            bundleID: bundleID, name: name, bundleContainer: container, bundlePath: bundlePath,
            executable: "\(bundlePath)/\(executable)", dataContainer: dataContainer(in: root),
            uid: uid, gid: gid, entitlements: try decodedEntitlements(), groupContainers: groups,
            hostExecutables: installedHostExecutables(in: root))
    }
}

extension InstalledApp {
    /// `AppdHostExecutables` of the installed (signed, checked at install and launch) Info.plist.
    func installedHostExecutables(in root: StateRoot) -> [String] {
        let paths = installedInfo(in: root)?[HostExecutables.infoKey] as? [String] ?? []
        var problems: [String] = []
        return HostExecutables.paths(
            in: [HostExecutables.infoKey: .array(paths.map { .string($0) })], problems: &problems)
    }
}

extension AppStore {
    /// `logs/<app>/` under the state root (root only, 0700, made if missing), opened as a
    /// directory: where `appd run` without a console has the launcher's output relay write
    /// `<instance>.log`, as the daemon's instances do (docs/app-output.md; the app itself only
    /// gets a pipe).
    public func openLogFolder(app: String) throws -> (fd: Int32, path: String) {
        let logs = "\(root.path)/logs"
        return (try LogDestination.openFolder(logs: logs, app: app), "\(logs)/\(app)")
    }
}

extension AppStore {
    /// The profile `app` launches with on this kernel: its inputs gathered from the registry
    /// and the configuration in force, compiled by `SandboxPolicy.compile`, with `/tmp` a link
    /// to its data container's tmp (`AppTmp`). Reads only (group containers are made at
    /// install).
    public func sandboxProfile(
        for app: InstalledApp, arguments: [String] = [], console: Bool = false,
        kernel: KernelLayers = .detect()
    ) throws -> SandboxProfile {
        let (settings, override) = config.sandboxInputs(for: app.bundleID)
        var subject = try app.sandboxSubject(in: root, groups: groupContainers(for: app))
        // What the signer may grant now: a program an admin has since taken out of its
        // HostExecutables= is not executable from the next launch on.
        subject.hostExecutables = subject.hostExecutables.filter {
            config.signing.allowsHostExecutable($0, keyID: app.signerKeyID, bundleID: app.bundleID)
        }
        var profile = try SandboxPolicy.compile(
            subject, settings: settings, override: override, kernel: kernel,
            arguments: arguments, console: console)
        AppTmp.link(in: &profile, dataContainer: subject.dataContainer)
        return profile
    }
}
