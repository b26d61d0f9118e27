import AppBundle
import AppdBase
import Foundation
import Glibc
import Synchronization

extension AppStore {
    /// Checks, just before a launch, that the bundle container is what was installed: the whole
    /// tree when it is at most `[Signing] LaunchCheckMaxBytes` (hashing it costs about what
    /// reading it does), else the executable. The container is root-owned and read-only, so a
    /// difference means someone with root, or the disk, changed it: the launch is refused and
    /// the message names what changed where it can.
    public func checkInstalledBundle(_ app: InstalledApp) throws {
        guard let bundlePath = app.bundlePath(in: root), let executable = app.executable else {
            throw AppdError(
                .notFound, "\(app.bundleID) has no installed bundle (uninstalled with --keep-data)",
                hint: "install it again to launch it")
        }
        guard let executableHash = app.executableHash else {
            // Installed before appd recorded hashes: nothing to compare with.
            guard config.signing.allowUnsigned else {
                throw AppdError(
                    .permissionDenied,
                    "\(app.bundleID) was installed before appd checked code signatures, so its bundle cannot be verified",
                    hint: "install a signed version of it again")
            }
            return
        }
        let layout = app.layout.flatMap(BundleLayout.init(rawValue:)) ?? .ios
        let wholeTree =
            app.treeHash != nil && (app.totalBytes ?? .max) <= config.signing.launchCheckMaxBytes
        // Hashed once, then trusted while nothing in the tree changed: the fingerprint is taken
        // before the hash, so a change during or after hashing makes the next launch hash again.
        let expected = (wholeTree ? app.treeHash : nil) ?? executableHash
        let fingerprint = try BundleFingerprint.read(
            bundleAt: bundlePath, limits: config.bundleLimits)
        if let fingerprint,
            launchChecks.isIntact(bundlePath, expected: expected, fingerprint: fingerprint)
        {
            return
        }
        launchChecks.hashed()
        try checkByHashing(
            app, bundlePath: bundlePath, executable: executable, executableHash: executableHash,
            layout: layout,
            wholeTree: wholeTree)
        if let fingerprint {
            launchChecks.remember(bundlePath, expected: expected, fingerprint: fingerprint)
        }
    }

    private func checkByHashing(
        _ app: InstalledApp, bundlePath: String, executable: String, executableHash: Data,
        layout: BundleLayout,
        wholeTree: Bool
    ) throws {
        if wholeTree, let treeHash = app.treeHash {
            // The tree against its seal, through the verifier install sealed it with.
            let verifier = BundleVerifier(limits: config.bundleLimits)
            guard
                let changes = try verifier.changes(
                    sinceSealed: Array(treeHash), at: bundlePath, layout: layout,
                    codeResourcesDigest: app.codeResourcesHash.map(Array.init))
            else { return }
            throw AppdError(
                .corruptState,
                "\(app.bundleID): the installed bundle \(bundlePath) was changed after it was installed; refusing to launch it",
                problems: changes, hint: "install the app again")
        }
        let actual = try Self.hashFile(bundlePath, executable)
        guard Data(actual) != executableHash else { return }
        throw AppdError(
            .corruptState,
            "\(app.bundleID): the executable \(bundlePath)/\(executable) was changed after it was installed; refusing to launch it",
            problems: [BundleProblem(executable, "its SHA-256 is not the one recorded at install")],
            hint: "install the app again")
    }

    /// SHA-256 of `relative` below `bundle`, opened without following a symlink at the end.
    static func hashFile(_ bundle: String, _ relative: String) throws -> [UInt8] {
        let path = "\(bundle)/\(relative)"
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw AppdError.system("open \(path)") }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1 << 18)
        return try ContentHasher.sha256(of: fd, what: path, buffer: &buffer)
    }
}

/// The bundles the launch-time check found intact: by bundle path, the hash it compared with
/// and the tree's fingerprint just before. Bounded (an entry per installed bundle; it starts
/// over past 4,096, as after an upgrade of every app).
final class LaunchCheckCache: Sendable {
    private struct Verified {
        var expected: Data
        var fingerprint: [UInt8]
    }

    private let verified = Mutex<[String: Verified]>([:])
    /// How many checks hashed (the rest trusted a fingerprint): what the tests look at.
    private let hashes = Mutex(0)

    var hashCount: Int { hashes.withLock { $0 } }

    func hashed() { hashes.withLock { $0 += 1 } }

    func isIntact(_ bundle: String, expected: Data, fingerprint: [UInt8]) -> Bool {
        verified.withLock {
            $0[bundle].map { $0.expected == expected && $0.fingerprint == fingerprint } ?? false
        }
    }

    func remember(_ bundle: String, expected: Data, fingerprint: [UInt8]) {
        verified.withLock { verified in
            if verified[bundle] == nil, verified.count >= 4096 { verified.removeAll() }
            verified[bundle] = Verified(expected: expected, fingerprint: fingerprint)
        }
    }
}
