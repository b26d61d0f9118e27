import AppdBase
import Foundation
import Glibc
import Sandbox

/// One thing doctor looked at and found wrong.
public struct DoctorFinding: Sendable, Codable, Equatable {
    /// The app or path concerned.
    public var subject: String
    public var problem: String
    /// What doctor did about it; nil if it needs a person (the message says what to do).
    public var repair: String?
}

public struct DoctorReport: Sendable, Codable {
    public var findings: [DoctorFinding] = []
    public var appsChecked = 0
    /// What this kernel's layers mean for apps with no network, network.client and
    /// network.server under the current [Sandbox] settings (docs/sandbox-layers.md).
    public var sandbox: [SandboxLayerSummary] = []
    /// Whether the kernel reports sandbox denials to the daemon's denial log (docs/denials.md).
    public var denialLog: KernelDenialReporting.Status?
    /// Which OCI engines on this host call appd-oci (docs/kubernetes.md); set by `appd doctor`,
    /// informational (never a finding).
    public var ociRuntime: OCIRuntimeRegistration?
    /// Findings nobody repaired.
    public var unresolved: [DoctorFinding] { findings.filter { $0.repair == nil } }
}

extension AppStore {
    /// Checks registry against disk. With `repair`, fixes what it safely can: staging
    /// leftovers and orphan containers (via recovery), layout modes, the owner and mode of data
    /// containers and their standard directories, a missing data container (recreated empty:
    /// the data is already gone, the app should still start). Never deletes a container a row
    /// names, and never touches files inside a data container.
    ///
    /// Without `repair` it changes nothing, so it also works on a store opened read-only; a
    /// root without a registry yet (nothing ever installed) has no apps to check.
    public func doctor(repair: Bool, kernel: KernelLayers = .detect(), onWait: () -> Void = {})
        throws -> DoctorReport
    {
        var exists = stat()
        guard repair || lstat(root.path, &exists) == 0 else {
            throw AppdError(
                .notFound, "the state root \(root.path) does not exist: there is nothing to check",
                hint:
                    "appd serve or 'appd doctor --repair' creates it; or name another one with --root"
            )
        }
        let lock = try StateLock(root, onWait: onWait)
        defer { withExtendedLifetime(lock) {} }
        let registry: Registry? = repair ? try writableRegistry : self.registry
        var report = DoctorReport()
        report.sandbox = SandboxPolicy(settings: config.sandbox, kernel: kernel).kernelSummary()
        report.denialLog = KernelDenialReporting.check()
        func note(_ subject: String, _ problem: String, _ repaired: String?) {
            report.findings.append(
                DoctorFinding(subject: subject, problem: problem, repair: repaired))
        }

        for problem in try registry?.integrityProblems() ?? [] {
            note(root.registryPath, "SQLite integrity check: \(problem)", nil)
        }
        for (relative, mode) in StateRoot.layout {
            let full = relative.isEmpty ? root.path : "\(root.path)/\(relative)"
            var st = stat()
            guard lstat(full, &st) == 0 else { continue }  // createLayout made it
            if st.st_mode & 0o7777 != mode || st.st_uid != 0 {
                let problem =
                    "mode \(String(st.st_mode & 0o7777, radix: 8)) owner \(st.st_uid), expected mode \(String(mode, radix: 8)) owner 0"
                let fixed = repair && chown(full, 0, 0) == 0 && chmod(full, mode) == 0
                note(
                    full, problem,
                    fixed ? "reset to mode \(String(mode, radix: 8)) owner root" : nil)
            }
        }

        if repair {
            let recovered = try recover()
            for name in recovered.staging {
                note("\(root.stagingPath)/\(name)", "left by an interrupted operation", "removed")
            }
            for name in recovered.orphanBundleContainers {
                note(root.bundleContainer(name), "no app owns this bundle container", "removed")
            }
            for name in recovered.orphanDataContainers {
                note(root.dataContainer(name), "no app owns this data container", "removed")
            }
            for entry in recovered.quarantined {
                note(
                    entry.path, "could not be removed (from \(entry.origin)): \(entry.reason)", nil)
            }
        } else {
            let apps = try registry?.apps() ?? []
            let named = Set(apps.compactMap(\.bundleUUID)).union(apps.map(\.dataUUID))
            for name in (try? FileDescriptor.directory(root.stagingPath).entries()) ?? [] {
                note("\(root.stagingPath)/\(name)", "left by an interrupted operation", nil)
            }
            for dir in [root.bundleContainersPath, root.dataContainersPath] {
                for name in (try? FileDescriptor.directory(dir).entries()) ?? []
                where !named.contains(name) {
                    note("\(dir)/\(name)", "no app owns this container", nil)
                }
            }
        }

        checkQuarantine(repair: repair, note: note)
        for group in try registry?.allGroups() ?? [] {
            try check(group, repair: repair, note: note)
        }
        if let bytes = config.sandbox.dataQuota, case .notEnforced(let reason)? = dataQuotaSupport {
            note(
                root.path,
                "[Sandbox] DataQuota=\(bytes) is NOT ENFORCED: \(reason); an app can fill this filesystem",
                nil)
        }
        let quotaEnforced = dataQuotaSupport == .enforced
        for app in try registry?.apps() ?? [] {
            report.appsChecked += 1
            try check(app, repair: repair, note: note)
            // Not under its quota yet (installed before DataQuota=), or under an old value.
            let configured = ((config.dataQuota(for: app.bundleID) ?? 0) + 1023) / 1024 * 1024
            if quotaEnforced, let status = dataQuotaStatus(for: app),
                !status.enforced || status.limitBytes != configured
            {
                var fixed: String?
                if repair, let dir = try? FileDescriptor.directory(app.dataContainer(in: root)) {
                    try applyDataQuota(dir, uid: app.uid, bundleID: app.bundleID, path: dir.path)
                    fixed = "project \(app.uid) limited to \(configured) bytes"
                }
                let problem =
                    status.enforced
                    ? "its limit is \(status.limitBytes) bytes, [Sandbox] DataQuota= says \(configured)"
                    : status.reason ?? "not under its quota"
                note(app.bundleID, "data container: \(problem)", fixed)
            }
        }
        return report
    }

    /// What recovery could not remove and moved aside: reported until it is gone; `repair`
    /// tries again (after the admin removed the cause: an immutable file, a mount).
    private func checkQuarantine(repair: Bool, note: (String, String, String?) -> Void) {
        guard let quarantine = try? FileDescriptor.directory(root.quarantinePath),
            let names = try? quarantine.entries()
        else { return }
        for name in names {
            let path = quarantine.child(name)
            guard repair else {
                note(
                    path,
                    "quarantined: an earlier removal failed; fix the cause, then 'appd doctor --repair'",
                    nil)
                continue
            }
            do {
                try quarantine.removeTree(name)
                note(path, "quarantined: an earlier removal failed", "removed")
            } catch {
                note(
                    path,
                    "quarantined, and it still cannot be removed: \((error as? AppdError)?.message ?? "\(error)")",
                    nil)
            }
        }
    }

    /// A group's container must exist, as a directory root:<gid> 2770: a launch mounts it.
    private func check(
        _ group: AppGroupRecord, repair: Bool, note: (String, String, String?) -> Void
    )
        throws
    {
        let path = "\(root.groupContainersPath)/\(group.uuid)"
        var st = stat()
        let missing = lstat(path, &st) != 0
        guard
            missing || st.st_mode & S_IFMT != S_IFDIR || st.st_uid != 0 || st.st_gid != group.gid
                || st.st_mode & 0o7777 != 0o2770
        else { return }
        let problem =
            missing
            ? "its container \(path) is missing"
            : "its container \(path) is not a directory root:\(group.gid) mode 2770"
        var fixed: String?
        if repair && (missing || st.st_mode & S_IFMT == S_IFDIR) {
            let parent = try FileDescriptor.directory(root.groupContainersPath)
            let dir =
                missing
                ? try parent.makeDirectory(group.uuid, mode: 0o700)
                : try parent.openDirectory(group.uuid)
            try dir.chown(uid: 0, gid: group.gid)
            try dir.chmod(0o2770)
            if missing { try applyGroupQuota(dir, gid: group.gid) }
            fixed = missing ? "recreated empty" : "reset to root:\(group.gid) mode 2770"
        }
        note("application group \(group.groupID)", problem, fixed)
    }

    private func check(_ app: InstalledApp, repair: Bool, note: (String, String, String?) -> Void)
        throws
    {
        let id = app.bundleID
        if let other = getpwuid(app.uid) {
            note(
                id,
                "uid \(app.uid) is also the host account '\(String(cString: other.pointee.pw_name))'",
                nil)
        }
        if app.state == .installed {
            if let bundle = app.bundlePath(in: root), let executable = app.executable {
                var st = stat()
                if lstat(bundle, &st) != 0 || st.st_mode & S_IFMT != S_IFDIR {
                    note(id, "its bundle \(bundle) is missing", nil)
                } else if lstat("\(bundle)/\(executable)", &st) != 0
                    || st.st_mode & S_IFMT != S_IFREG
                {
                    note(id, "its executable \(bundle)/\(executable) is missing", nil)
                }
            } else {
                note(id, "the registry row has no bundle container", nil)
            }
        }

        let dataPath = app.dataContainer(in: root)
        var st = stat()
        guard lstat(dataPath, &st) == 0 else {
            var fixed: String?
            if repair {
                let data = try FileDescriptor.directory(root.dataContainersPath)
                try DataContainer.create(in: data, name: app.dataUUID, uid: app.uid, gid: app.gid)
                fixed = "recreated empty"
            }
            note(id, "its data container \(dataPath) is missing", fixed)
            return
        }
        guard st.st_mode & S_IFMT == S_IFDIR else {
            note(id, "its data container \(dataPath) is not a directory", nil)
            return
        }
        var problems = DataContainer.problems(at: dataPath, uid: app.uid, gid: app.gid)
        guard !problems.isEmpty else { return }
        var fixed: String?
        if repair {
            do {
                try DataContainer.populate(
                    try FileDescriptor.directory(dataPath), uid: app.uid, gid: app.gid)
                fixed = "owner \(app.uid):\(app.gid), mode 700, standard directories restored"
            } catch {
                problems.append("repair failed: \(error)")
            }
        }
        note(id, "data container \(dataPath): " + problems.joined(separator: "; "), fixed)
    }
}
