import AppBundle
import AppdBase
import Foundation
import Glibc
import Sandbox

public struct InstallOptions: Sendable {
    public var allowDowngrade = false
    /// Accept an upgrade signed by another key than the installed version (an admin's choice;
    /// by default an upgrade must come from the same signer, Android's rule).
    public var allowSignerChange = false
    /// Called while files are copied (files so far, bytes so far); for progress displays.
    public var progress:
        (@Sendable (_ files: Int, _ bytes: Int64, _ totalFiles: Int, _ totalBytes: Int64) -> Void)?
    /// Called once if another appd process holds the state lock.
    public var onWait: @Sendable () -> Void = {}

    public init() {}
}

public struct InstallResult: Sendable {
    public var app: InstalledApp
    /// The version replaced, for an upgrade; nil for a new install (or a return after
    /// `uninstall --keep-data`, see `reusedData`).
    public var previousVersion: String?
    /// The data container existed before this install (upgrade, or return after --keep-data).
    public var reusedData: Bool
    public var bundle: AppBundle
    public var recovery: RecoveryReport
    /// Who signed it and, for an unsigned development install, the warning to log loudly.
    public var signing: SigningDecision
    /// How long each step took (the daemon's `receive` and `record` are its own to fill).
    public var timings = InstallTimings()

    /// The bundle's warnings, after the unsigned-install warning if there is one.
    public var warnings: [BundleProblem] {
        (signing.warning.map { [BundleProblem("", $0)] } ?? []) + bundle.warnings
    }
}

extension AppStore {
    /// Installs or upgrades the bundle at `path`.
    ///
    /// The order is what makes it crash-safe: (1) verify what names the source and its rights
    /// with `BundleVerifier` (its Info.plist and Entitlements.plist against its signature, its
    /// programs on this host, the signer's policy; cheap: a few small files, no tree hashing);
    /// (2) copy it into `staging/<txn>/` through the walker's checked fds, hashing every byte on
    /// the way; (3) validate the staged copy, which is the one that counts (root-owned, nobody
    /// can change it now), and compare the hashes with its CodeResources (the verifier again);
    /// (4) make it durable (syncfs); (5) publish the containers by rename; (6) commit the
    /// registry row; (7) only then remove the old bundle container. A crash before (6) leaves
    /// unnamed containers that recovery removes; after (6), an old container that recovery
    /// removes. No step ever touches the contents of an existing data container.
    public func install(bundleAt path: String, options: InstallOptions = .init()) throws
        -> InstallResult
    {
        try install(.folder(path), options: options)
    }

    /// Installs or upgrades a bundle that was extracted from an archive (the daemon's
    /// `incoming/<uuid>/Name.app`, root-only, written by this process and by nothing else),
    /// with `digests` the SHA-256 of every regular file taken as its bytes were written.
    ///
    /// The same steps as `install(bundleAt:)`, except (2): the tree is not copied but moved into
    /// staging by one rename (it is on the state root's filesystem), and the walk that seals it
    /// (modes 0444/0555, the same as a copy gets) takes each file's hash from `digests` instead
    /// of reading it again. So the bytes of an install through the daemon are written once. The
    /// tree must be a directory of the state root's filesystem that no one else can write, so
    /// (3) is not repeated: the tree checked in (1) is the staged one, renamed, its modes sealed.
    /// It is gone (moved or removed) when this returns or throws.
    public func install(
        extractedBundleAt path: String, digests: [String: [UInt8]],
        options: InstallOptions = .init()
    ) throws -> InstallResult {
        try install(.extracted(path, digests), options: options)
    }

    enum InstallSource {
        case folder(String)
        case extracted(String, [String: [UInt8]])

        var path: String {
            switch self {
            case .folder(let path), .extracted(let path, _): path
            }
        }
    }

    private func install(_ input: InstallSource, options: InstallOptions) throws -> InstallResult {
        var timings = InstallTimings()
        var laps = Laps()
        let (lock, recovered) = try lockAndRecover(onWait: options.onWait)
        timings.lock = laps.lap()
        var recovery = recovered
        defer { withExtendedLifetime(lock) {} }
        CrashPoint.reach("install.locked")
        let registry = try writableRegistry
        // One snapshot for the whole install: a reload in between changes the next one.
        let config = self.config
        let limits = config.bundleLimits

        // The source is verified before anything is copied (what names it and its rights, the
        // host's libraries, the signer's policy), and the staged copy, the one that counts,
        // again.
        let verifier = BundleVerifier(
            config, host: try HostLibraries(systemPaths: config.sandbox.systemPaths))
        let checked = try verifier.verifyMetadata(at: input.path)
        let source = checked.bundle
        let id = source.info.identifier.rawValue
        guard let signing = checked.decision else {
            throw AppdError(.internal, "\(id): the signer policy was not asked")
        }
        let existing = try registry.app(id)
        if let existing {
            guard existing.bundleID == id else {
                throw AppdError(
                    .conflict,
                    "'\(id)' differs only in case from the installed '\(existing.bundleID)'; bundle ids are compared without regard to case",
                    hint: "fix CFBundleIdentifier, or uninstall '\(existing.bundleID)' first")
            }
            if let installed = existing.version,
                let old = try? BundleVersion(validating: installed),
                source.info.version < old, !options.allowDowngrade
            {
                throw AppdError(
                    .conflict,
                    "\(id) \(installed) is installed; refusing to replace it with the older \(source.info.version)",
                    hint: "pass --allow-downgrade if the app's data can take it")
            }
            try Self.checkSignerContinuity(existing, signing, options: options)
        }
        try checkGroupOwners(signing.groups, keyID: signing.keyID, bundleID: id)
        try checkGroupLimits(signing.groups, keyID: signing.keyID, bundleID: id)
        timings.check = laps.lap()

        let txnName = "install-\(UUID().uuidString)"
        let staging = try FileDescriptor.directory(root.stagingPath)
        let txn = try staging.makeDirectory(txnName)
        // Whatever happens next, a failure leaves no trace; a crash leaves it to recover().
        var published = false
        defer { if !published { try? staging.removeTree(txnName) } }

        let bundleUUID = UUID().uuidString
        let bundleContainer = try txn.makeDirectory("bundle")
        let manifest: ManifestBuilder
        let stagedBundle: FileDescriptor
        var staged: VerifiedBundle
        let progress = options.progress.map { progress in
            let (totalFiles, totalBytes) = (source.fileCount, source.totalBytes)
            return { @Sendable (files: Int, bytes: Int64) in
                progress(files, bytes, totalFiles, totalBytes)
            }
        }
        do {
            switch input {
            case .folder:
                stagedBundle = try bundleContainer.makeDirectory(source.directoryName)
                var copier = BundleCopier(into: stagedBundle, limits: limits, layout: source.layout)
                copier.progress = progress
                let copied = try BundleWalker.walk(source.path, limits: limits, visitor: &copier)
                guard copied.problems.isEmpty else {
                    throw AppdError(
                        .invalidBundle, "changed while it was being installed",
                        subject: .init(.bundle), problems: copied.problems)
                }
                manifest = copier.manifest
            case .extracted(let path, let digests):
                // One rename: the extracted tree becomes the staged bundle, its bytes stay where
                // they were written.
                let parent = try FileDescriptor.directory(
                    (path as NSString).deletingLastPathComponent)
                try parent.rename(
                    source.directoryName, to: bundleContainer, as: source.directoryName)
                stagedBundle = try bundleContainer.openDirectory(source.directoryName)
                var sealer = BundleSealer(digests: digests, layout: source.layout)
                sealer.progress = progress
                let sealed = try BundleWalker.walk(
                    stagedBundle.path, limits: limits, visitor: &sealer)
                guard sealed.problems.isEmpty else {
                    throw AppdError(
                        .invalidBundle, "changed while it was being installed",
                        subject: .init(.bundle), problems: sealed.problems)
                }
                try sealer.checkComplete()
                manifest = sealer.manifest
            }
            CrashPoint.reach("install.copied")
            timings.stage = laps.lap()

            switch input {
            case .folder:
                // The copy is the one that counts (root-owned, nobody can change it now): read
                // and verified again, since the source may have changed since it was checked.
                staged = try verifier.verifyMetadata(at: stagedBundle.path)
                try Self.checkUnchanged(staged, since: checked)
            case .extracted:
                // Renamed, not copied: what was checked in incoming/ (root-only, written by this
                // process alone) is what staging holds, byte for byte; only the modes changed,
                // to the installed ones. Reading it all again (every file's metadata, the
                // property lists, the programs' ELF headers, the signature and its Ed25519
                // check) would find the same. The hashes the extractor took are checked
                // against the signature's CodeResources all the same.
                staged = checked
                staged.bundle = source.moved(to: stagedBundle.path)
            }
            // The hashes taken while copying against the staged signature's CodeResources.
            try verifier.verifyContents(&staged, hashed: manifest)
            timings.verify = laps.lap()
        } catch let error as AppdError {
            // The bundle is shown where its caller has it, not where staging does.
            throw error.viewing(.bundle, as: input.path)
        }

        let uid = try existing?.uid ?? allocateUID(registry)
        let gid = uid
        // Only root and the app may enter the bundle container; nobody may write it.
        try stagedBundle.chmod(0o555)
        try bundleContainer.chown(uid: 0, gid: gid)
        try bundleContainer.chmod(0o550)

        let dataUUID: String
        if let existing {
            dataUUID = existing.dataUUID
            guard FileManager.default.fileExists(atPath: existing.dataContainer(in: root)) else {
                throw AppdError(
                    .corruptState,
                    "the data container of \(existing.bundleID) (\(existing.dataContainer(in: root))) is missing",
                    hint: "run 'appd doctor' to recreate an empty one")
            }
            // DataQuota= may be new, or changed, since the last install.
            let dir = try FileDescriptor.directory(existing.dataContainer(in: root))
            try applyDataQuota(dir, uid: uid, bundleID: id, path: dir.path)
        } else {
            dataUUID = UUID().uuidString
            try DataContainer.create(in: txn, name: "data", uid: uid, gid: gid)
            let dir = try txn.openDirectory("data")
            try applyDataQuota(dir, uid: uid, bundleID: id, path: dir.path)
        }
        CrashPoint.reach("install.staged")
        try txn.syncFilesystem()
        CrashPoint.reach("install.synced")
        timings.sync = laps.lap()

        let bundles = try FileDescriptor.directory(root.bundleContainersPath)
        let data = try FileDescriptor.directory(root.dataContainersPath)
        if existing == nil {
            try txn.rename("data", to: data, as: dataUUID)
            try data.sync()
            CrashPoint.reach("install.data-published")
        }
        try txn.rename("bundle", to: bundles, as: bundleUUID)
        try bundles.sync()
        CrashPoint.reach("install.published")
        timings.publish = laps.lap()

        try createMissingGroups(signing.groups, keyID: signing.keyID, appUID: uid)
        CrashPoint.reach("install.groups-created")

        let now = Date()
        let tree = staged.manifest ?? BundleManifest()
        let signature = staged.signature
        let executableHash: Data? =
            if case .file(let sha256)? = tree.entries[staged.bundle.executablePath] {
                Data(sha256)
            } else { nil }
        let app = InstalledApp(
            bundleID: id, state: .installed, uid: uid, dataUUID: dataUUID, bundleUUID: bundleUUID,
            bundleName: source.directoryName, title: staged.bundle.info.title,
            version: staged.bundle.info.version.rawValue,
            shortVersion: staged.bundle.info.shortVersion,
            executable: staged.bundle.executablePath, layout: staged.bundle.layout.rawValue,
            entitlements: try staged.bundle.entitlements.plistData(),
            fileCount: staged.bundle.fileCount, totalBytes: staged.bundle.totalBytes,
            installedAt: existing?.installedAt ?? now, updatedAt: now,
            signerKeyID: signing.keyID,
            codeResourcesHash: signature.map { Data($0.codeResourcesDigest) },
            executableHash: executableHash, treeHash: Data(tree.digest))
        try registry.save(app)
        published = true
        CrashPoint.reach("install.committed")
        timings.commit = laps.lap()

        // The new version is live; the old bundle container is garbage from here on (and
        // recovery would remove it if we stopped now).
        if let old = existing?.bundleUUID {
            _ = discardReporting(old, in: bundles, into: &recovery)
        }
        CrashPoint.reach("install.old-removed")
        // Groups the previous version used and this one does not go with their last app.
        if let existing {
            let dropped = try existing.decodedEntitlements().strings(
                EntitlementCatalog.applicationGroups
            )
            .filter { id in !signing.groups.contains { $0.lowercased() == id.lowercased() } }
            try removeUnusedGroups(dropped, into: &recovery)
        }
        try staging.removeTree(txnName)

        mutationFinished()
        timings.cleanup = laps.lap()
        return InstallResult(
            app: app, previousVersion: existing?.state == .installed ? existing?.version : nil,
            reusedData: existing != nil,
            bundle: AppBundle(
                path: app.bundlePath(in: root) ?? staged.bundle.path,
                layout: staged.bundle.layout, info: staged.bundle.info,
                entitlements: staged.bundle.entitlements,
                executablePath: staged.bundle.executablePath,
                fileCount: staged.bundle.fileCount, totalBytes: staged.bundle.totalBytes,
                warnings: source.warnings, programs: staged.bundle.programs,
                symlinks: staged.bundle.symlinks),
            recovery: recovery, signing: signing, timings: timings)
    }
}

extension AppStore {
    /// The staged copy says what the source said: the same app, version and entitlements,
    /// and the same signature (same bytes), so what was authorized before the copy is what was
    /// copied.
    static func checkUnchanged(_ staged: VerifiedBundle, since source: VerifiedBundle) throws {
        guard staged.bundle.info.identifier == source.bundle.info.identifier,
            staged.bundle.info.version == source.bundle.info.version,
            staged.bundle.entitlements == source.bundle.entitlements
        else {
            throw AppdError(
                .invalidBundle,
                "changed while it was being installed (Info.plist or Entitlements.plist differ from what was validated)",
                subject: .init(.bundle))
        }
        guard staged.signature?.codeResources == source.signature?.codeResources else {
            throw AppdError(
                .invalidBundle,
                "the code signature changed while the bundle was being installed",
                subject: .init(.bundle))
        }
    }

    /// A uid for a new app from `[Users] UIDRange`. When none is left the error counts the
    /// apps that hold the range, and apart from them the groups a state root from before
    /// `GroupRange` gave gids of it.
    func allocateUID(_ registry: Registry) throws -> UInt32 {
        let allocator = UIDAllocator(range: config.uidRange)
        let apps = try registry.appUIDs()
        let groups = try registry.usedGroupIDs()
        let legacy = allocator.held(groups)
        return try allocator.allocate(
            excluding: Set(apps).union(groups),
            exhausted: AppdError(
                .conflict,
                "no free uid left in [Users] UIDRange=\(config.uidRange.lowerBound)-\(config.uidRange.upperBound): \(allocator.held(apps)) apps hold one"
                    + (legacy > 0
                        ? ", and \(legacy) application groups made before GroupRange existed hold their gid"
                        : "")
                    + " (the rest are the host's accounts, groups or subordinate ids)",
                hint: "widen [Users] UIDRange= in appd.conf, or uninstall apps"))
    }

    /// Android's rule: an upgrade comes from the key that signed the installed version, so
    /// whoever holds another trusted key cannot take over an app and its data (also one
    /// uninstalled with --keep-data). An unsigned (development) install may be replaced by
    /// anyone the policy accepts.
    static func checkSignerContinuity(
        _ existing: InstalledApp, _ signing: SigningDecision, options: InstallOptions
    ) throws {
        guard let installed = existing.signerKeyID, installed != signing.keyID,
            !options.allowSignerChange
        else { return }
        throw AppdError(
            .conflict,
            "\(existing.bundleID) is installed signed by key \(installed); this bundle is \(signing.keyID.map { "signed by key \($0)" } ?? "unsigned"), and an upgrade must come from the same signer",
            hint:
                "sign it with the installed version's key, or an admin passes --allow-signer-change (the app's data goes to the new signer's code)"
        )
    }
}

/// How long each stage of an install took, in seconds: what `POST /v1/apps` answers in its
/// `Server-Timing` header and scripts/bench-install prints as the daemon's breakdown. The
/// stages follow `AppStore.install`'s steps; `receive` and `record` are the daemon's own.
public struct InstallTimings: StageTimings, Sendable, Equatable {
    /// The daemon: the request body arriving and being extracted, each file hashed as written.
    public var receive: Double = 0
    /// The state lock, recovery of staging, the mutation mark made durable.
    public var lock: Double = 0
    /// The source checked before anything is staged: Info.plist, the host's libraries, the
    /// signature and the signer's policy, the installed version.
    public var check: Double = 0
    /// Into staging: a copy hashing every byte (a folder), or one rename and the sealing walk
    /// (an extracted archive).
    public var stage: Double = 0
    /// The staged copy checked again: Info.plist, its signature against the hashes, the ELF checks.
    public var verify: Double = 0
    /// The uid, modes and owners, the data container, then `syncfs` of the state root.
    public var sync: Double = 0
    /// The containers renamed into place, their directories fsynced.
    public var publish: Double = 0
    /// Application groups created, the registry row committed.
    public var commit: Double = 0
    /// The old bundle container, unused groups and the transaction's folder removed.
    public var cleanup: Double = 0
    /// The daemon: the app list, the event, outdated instances marked.
    public var record: Double = 0

    public init() {}

    /// Each stage's name and seconds, in order.
    public var stages: [(name: String, seconds: Double)] {
        [
            ("receive", receive), ("lock", lock), ("check", check), ("stage", stage),
            ("verify", verify), ("sync", sync), ("publish", publish), ("commit", commit),
            ("cleanup", cleanup), ("record", record),
        ]
    }

}

extension AppBundle {
    /// The same bundle where a rename put it.
    fileprivate func moved(to path: String) -> AppBundle {
        AppBundle(
            path: path, layout: layout, info: info, entitlements: entitlements,
            executablePath: executablePath, fileCount: fileCount, totalBytes: totalBytes,
            warnings: warnings, programs: programs, symlinks: symlinks)
    }
}
