import AppContainers
import AppdBase
import Foundation
import Glibc
import Sandbox

/// A container without a `.app` (docs/oci-runtime.md, "Plain containers"): only with the
/// opt-in (`--plain`, `org.appd.plain=true`) or as a pod's sandbox ("pause") container. It gets
/// the profile of an app with no entitlements — seccomp's deny list, Landlock, no capabilities,
/// no network but its pod's loopback, W^X, the default limits — with the image's root
/// filesystem read-only in place of the host's system folders, and a private `/tmp`. It runs as
/// the config's uid, except that uid 0 becomes 65534 (nobody): root without capabilities would
/// still own root's files.
enum PlainContainer {
    static func profile(
        spec: OCISpec, rootfs: String, stateDirectory: String, config: AppdConfiguration,
        console: Bool
    ) throws -> PreparedSandbox {
        guard let args = spec.process?.args, let first = args.first else {
            throw AppdError(.invalidConfig, "config.json has no process.args")
        }
        let requestedUID = spec.process?.user?.uid ?? 0
        let requestedGID = spec.process?.user?.gid ?? 0
        let uid: UInt32 = requestedUID == 0 ? 65534 : requestedUID
        let gid: UInt32 = requestedGID == 0 ? 65534 : requestedGID
        let environment = spec.process?.env ?? []
        let path =
            environment.first { $0.hasPrefix("PATH=") }.map { String($0.dropFirst(5)) }
            ?? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        let executable = try resolve(first, path: path, rootfs: rootfs)

        // A scratch home nobody reads: the compile wants a data container.
        let parent = try FileDescriptor.directory(stateDirectory)
        let name = UUID().uuidString
        try DataContainer.create(in: parent, name: name, uid: uid, gid: gid)
        let home = "\(stateDirectory)/\(name)"
        var settings = config.sandbox
        settings.requireAppSandboxEntitlement = false
        let subject = SandboxSubject(
            bundleID: "org.appd.plain", name: "plain", bundleContainer: rootfs,
            bundlePath: rootfs, executable: "\(rootfs)\(executable)", dataContainer: home,
            uid: uid, gid: gid, entitlements: .init(values: [:]), groupContainers: [])
        var profile = try SandboxPolicy.compile(
            subject, settings: settings, kernel: .detect(), console: console)

        // The image's root in place of the host's system folders and /etc.
        let hostOnly = Set(
            settings.systemPaths + ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", rootfs])
        profile.mounts.removeAll { mount in
            hostOnly.contains(mount.destination) || mount.destination == "/etc"
                || mount.destination.hasPrefix("/etc/")
        }
        profile.landlock.paths.removeAll { rule in
            hostOnly.contains(rule.path) || rule.path == "/etc"
        }
        var top: [SandboxProfile.Mount] = []
        let names = (try? FileManager.default.contentsOfDirectory(atPath: rootfs)) ?? []
        for entry in names.sorted() where !["proc", "dev", "sys", "tmp"].contains(entry) {
            let source = "\(rootfs)/\(entry)"
            var info = stat()
            guard lstat(source, &info) == 0 else { continue }
            switch info.st_mode & S_IFMT {
            case S_IFLNK:
                if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: source) {
                    top.append(.symlink(target, at: "/\(entry)"))
                }
            case S_IFDIR, S_IFREG:
                var bind = SandboxProfile.Mount.roBind(source)
                bind.destination = "/\(entry)"
                top.append(bind)
                profile.landlock.paths.append(
                    LandlockRules.PathRule(access: .rx, path: "/\(entry)"))
            default: continue
            }
        }
        top.append(.tmpfs("/tmp", mode: 0o1777))
        profile.landlock.paths.append(LandlockRules.PathRule(access: .rw, path: "/tmp"))
        profile.mounts.insert(contentsOf: top, at: 0)
        profile.executable = executable
        profile.arguments = args
        profile.workingDirectory = spec.process?.cwd ?? "/"
        profile.environment = OCIRuntime.extraEnvironment(environment, reserved: [])
        if !profile.environment.contains(where: { $0.name == "PATH" }) {
            profile.environment.append(.init(name: "PATH", value: path))
        }
        if let hostname = spec.hostname, !hostname.isEmpty { profile.hostname = hostname }
        return PreparedSandbox(
            profile: profile, bundleID: nil, dataContainer: home, dataInVolume: false)
    }

    /// `args[0]` as a path inside the image: absolute as given, else the first match in PATH.
    static func resolve(_ name: String, path: String, rootfs: String) throws -> String {
        if name.hasPrefix("/") { return name }
        for directory in path.split(separator: ":") where directory.hasPrefix("/") {
            let candidate = "\(directory)/\(name)"
            if access("\(rootfs)\(candidate)", X_OK) == 0 { return candidate }
        }
        throw AppdError(.notFound, "\(name) is not in the image's PATH (\(path))")
    }
}
