import AppdBase
import AppdConfig
import CLinux
import Glibc
import Sandbox

/// `[Sandbox] DataQuota=`: the kernel's project quotas (ext4, xfs) limit what each data
/// container (and each application-group container) holds, so one app cannot fill the state root's filesystem under the registry,
/// the logs, staging and every other app.
///
/// Each app's data container is its own project, numbered by the app's uid (unique, kept
/// across upgrades and `--keep-data`): the container directory gets that project id and the
/// inherit flag (FS_IOC_FSSETXATTR), so everything the app creates beneath it is charged to
/// it, and the project gets a hard block limit (quotactl Q_SETQUOTA, PRJQUOTA). A write past
/// it fails with EDQUOT; appd's own files are in project 0 and are not limited. The app
/// cannot move its files out of the project: seccomp refuses the ioctls that change a
/// project id or the inherit flag (SandboxPolicy+Seccomp), and the kernel refuses renames
/// and links across projects.
public enum DataQuota {
    /// What the filesystem holding `path` can do.
    public enum Support: Sendable, Equatable {
        case enforced
        case notEnforced(String)
    }

    public static func support(at path: String) -> Support {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            return .notEnforced("cannot open \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        return support(fd: fd)
    }

    static func support(fd: Int32) -> Support {
        let state = appd_project_quota_state(fd)
        switch state {
        case 2: return .enforced
        case 1:
            return .notEnforced(
                "project quotas are accounted but not enforced on this filesystem (mount it with prjquota)"
            )
        case -ENOSYS, -ESRCH:
            // ENOSYS: the filesystem has no quota operations (quotas not enabled on it), or the
            // kernel has no quotactl_fd at all (before 5.14, or without CONFIG_QUOTACTL).
            return .notEnforced(
                "this filesystem has no project quotas enabled (ext4: made or tuned with -O quota,project and mounted with prjquota, on a kernel with CONFIG_QUOTA and CONFIG_QFMT_V2; xfs: mounted with prjquota)"
            )
        default:
            return .notEnforced(
                "the filesystem has no project quotas (\(String(cString: strerror(-state))))")
        }
    }

    /// Charges the data container `dir` (and what is later created beneath it) to project
    /// `projectID`. Called on a new container before its standard directories exist, and on an
    /// existing one (upgrade, doctor) for itself and its standard directories.
    static func assign(_ dir: FileDescriptor, projectID: UInt32, path: String) throws {
        let r = appd_set_project(dir.raw, projectID)
        guard r == 0 else {
            throw AppdError(
                .io, "setting project quota id \(projectID) on \(path) failed", errno: -r)
        }
    }

    /// Sets the limit of `projectID` on the filesystem of `fd` (0: none).
    static func setLimit(fd: Int32, projectID: UInt32, bytes: Int64, path: String) throws {
        let r = appd_set_project_limit(fd, projectID, UInt64(max(bytes, 0)))
        guard r == 0 else {
            throw AppdError(
                .io, "setting the project quota of project \(projectID) on \(path) failed",
                errno: -r)
        }
    }

    /// The limit of `projectID` and its use, if the filesystem accounts it.
    static func usage(fd: Int32, projectID: UInt32) -> (used: Int64, limit: Int64)? {
        var used: UInt64 = 0
        var limit: UInt64 = 0
        guard appd_get_project_usage(fd, projectID, &used, &limit) == 0 else { return nil }
        return (Int64(clamping: used), Int64(clamping: limit))
    }
}

extension AppStore {
    /// Whether `[Sandbox] DataQuota=` is enforced on this state root (nil: none configured).
    public var dataQuotaSupport: DataQuota.Support? {
        let configured =
            config.sandbox.dataQuota != nil
            || config.apps.values.contains { $0.sandboxValue("DataQuota") != nil }
        return configured ? DataQuota.support(at: root.path) : nil
    }

    /// Puts the data container `dir` of an app with `uid` under its quota: project id and
    /// inherit flag on the container and its standard directories, and the configured limit.
    /// Nothing when no DataQuota is configured or the filesystem cannot enforce it.
    func applyDataQuota(_ dir: FileDescriptor, uid: UInt32, bundleID: String, path: String) throws {
        guard let bytes = config.dataQuota(for: bundleID),
            DataQuota.support(fd: dir.raw) == .enforced
        else {
            return
        }
        try DataQuota.assign(dir, projectID: uid, path: path)
        // The app's own directories: opened one level at a time without following links, so
        // a symlink planted as `Library` cannot steer the ioctl outside the container.
        for (name, children) in DataContainer.directories {
            guard let top = try? dir.openDirectory(name) else { continue }
            try DataQuota.assign(top, projectID: uid, path: top.path)
            for child in children {
                guard let sub = try? top.openDirectory(child) else { continue }
                try DataQuota.assign(sub, projectID: uid, path: sub.path)
            }
        }
        try DataQuota.setLimit(fd: dir.raw, projectID: uid, bytes: bytes, path: path)
    }

    /// An application group's container is writable by all its apps: it is the project of
    /// the group's gid (from the same range as app uids, so never another app's project),
    /// with the same limit.
    func applyGroupQuota(_ dir: FileDescriptor, gid: UInt32) throws {
        guard let bytes = config.sandbox.dataQuota, DataQuota.support(fd: dir.raw) == .enforced
        else {
            return
        }
        try DataQuota.assign(dir, projectID: gid, path: dir.path)
        try DataQuota.setLimit(fd: dir.raw, projectID: gid, bytes: bytes, path: dir.path)
    }

    /// Removes the limit of an uninstalled app's (or removed group's) project, so a later app given the same uid
    /// starts from the configuration, not from a leftover limit.
    func clearDataQuota(uid: UInt32) {
        guard config.sandbox.dataQuota != nil,
            let fd = try? FileDescriptor.directory(root.dataContainersPath),
            DataQuota.support(fd: fd.raw) == .enforced
        else { return }
        try? DataQuota.setLimit(fd: fd.raw, projectID: uid, bytes: 0, path: root.dataContainersPath)
    }

    /// The data container's limit as `appd profile` shows it; nil when none is configured.
    public func dataQuotaStatus(for app: InstalledApp) -> DataQuotaStatus? {
        guard let bytes = config.dataQuota(for: app.bundleID) else { return nil }
        switch DataQuota.support(at: root.path) {
        case .notEnforced(let reason):
            return DataQuotaStatus(
                limitBytes: bytes, enforced: false, projectID: app.uid, reason: reason)
        case .enforced:
            let fd = open(
                app.dataContainer(in: root), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else {
                return DataQuotaStatus(
                    limitBytes: bytes, enforced: false, projectID: app.uid,
                    reason: "the data container cannot be opened")
            }
            defer { close(fd) }
            var project: UInt32 = 0
            let inherit = appd_get_project(fd, &project)
            let usage = DataQuota.usage(fd: fd, projectID: app.uid)
            guard inherit == 1, project == app.uid, let usage, usage.limit > 0 else {
                return DataQuotaStatus(
                    limitBytes: bytes, enforced: false, projectID: app.uid,
                    usedBytes: usage?.used,
                    reason:
                        "the data container is not under its quota yet (installed before DataQuota=; 'appd doctor --repair' applies it)"
                )
            }
            return DataQuotaStatus(
                limitBytes: usage.limit, enforced: true, projectID: app.uid, usedBytes: usage.used)
        }
    }
}

extension AppdConfiguration {
    /// `DataQuota=` of the app's `[App ID]` section if it sets one, else `[Sandbox]`'s.
    public func dataQuota(for bundleID: String) -> Int64? {
        guard let override = override(for: bundleID), override.sandboxValue("DataQuota") != nil
        else { return sandbox.dataQuota }
        return override.applied(to: sandbox).dataQuota
    }
}

extension AppStore {
    /// Puts a changed `DataQuota=` of `app`'s `[App ID]` section in force at once (a reload):
    /// the project's limit only, on a container already under its quota. Returns what was
    /// done, nil when there was nothing to do (no quota, or the filesystem cannot enforce it).
    public func applyDataQuotaLimit(for app: InstalledApp) throws -> String? {
        guard let fd = try? FileDescriptor.directory(app.dataContainer(in: root)),
            DataQuota.support(fd: fd.raw) == .enforced
        else { return nil }
        let bytes = config.dataQuota(for: app.bundleID)
        // Without a limit the project stays assigned; 0 means "no limit" to the kernel.
        try DataQuota.setLimit(fd: fd.raw, projectID: app.uid, bytes: bytes ?? 0, path: fd.path)
        return "data quota \(bytes.map { "\($0) bytes" } ?? "none")"
    }
}
