import AppBundle
import AppContainers
import AppdBase
import Foundation
import Glibc
import Sandbox

/// The image convention (docs/oci-image.md): the root filesystem holds exactly one bundle,
/// `/Name.app`, and `process.args[0]` names its executable. At `create` the bundle is verified
/// as `appd install` verifies it, against this node's appd.conf: its code signature, then the
/// `[Signer]` policy (unsigned refused unless `AllowUnsigned=yes`, entitlements the signer may
/// not grant refused). Its entitlements then compile to the profile a daemon launch gets.
struct AppImage {
    var bundle: AppBundle
    /// Its signature, verified over its CodeResources (nil: unsigned, and allowed).
    var signature: CodeSignature?
    var decision: SigningDecision
    /// The arguments after the executable.
    var arguments: [String]

    /// The one `Name.app` at the top of `rootfs`, or nil when there is none (a plain image).
    /// More than one is refused: which app runs must not depend on directory order.
    static func find(in rootfs: String) throws -> String? {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: rootfs) else {
            throw AppdError(.invalidConfig, "the root filesystem \(rootfs) cannot be read")
        }
        let bundles = names.filter { name in
            var info = stat()
            return name.hasSuffix(".app") && lstat("\(rootfs)/\(name)", &info) == 0
                && info.st_mode & S_IFMT == S_IFDIR
        }.sorted()
        guard bundles.count <= 1 else {
            throw AppdError(
                .invalidBundle,
                "the image holds \(bundles.count) bundles (\(bundles.joined(separator: ", "))); an appd image holds exactly one Name.app at its root"
            )
        }
        return bundles.first.map { "\(rootfs)/\($0)" }
    }

    /// Verifies what names the bundle at `path` and its rights as install does (its signature,
    /// its Info.plist and Entitlements.plist against it, the `[Signer]` policy) and checks
    /// `args[0]` names its executable. The rest of the tree is `checkContents`, which `create`
    /// runs while the launcher builds the sandbox: it must pass before the app may start.
    static func verify(at path: String, args: [String], config: AppdConfiguration) throws
        -> AppImage
    {
        let bundle = try AppBundle.open(at: path, limits: config.bundleLimits)
        let check = try bundle.checkSignedMetadata(limits: config.bundleLimits)
        try refuse(bundle, signed: check.signature != nil, check.problems)
        // The app runs on this node's /usr, as install checks it: another CPU's image, or one
        // needing a library the node lacks, is refused here rather than by the loader.
        try bundle.checkRuns(on: HostLibraries(systemPaths: config.sandbox.systemPaths))
        let id = bundle.info.identifier.rawValue
        let decision = try config.signing.authorize(
            signature: check.signature, bundleID: id, entitlements: bundle.entitlements,
            hostExecutables: bundle.info.hostExecutables)
        let executable = "/\(bundle.directoryName)/\(bundle.executablePath)"
        guard let first = args.first else {
            throw AppdError(
                .invalidConfig, "config.json has no process.args; the app's is \(executable)")
        }
        guard OCIConfigCheck.normalized(first) == executable else {
            throw AppdError(
                .permissionDenied,
                "process.args[0] is \(first), not the bundle's executable \(executable)",
                hint: "an appd image runs its bundle's executable (appd image sets the entrypoint)")
        }
        return AppImage(
            bundle: bundle, signature: check.signature, decision: decision,
            arguments: Array(args.dropFirst()))
    }

    /// Every file of the bundle against its signature, as `appd install` checks it (the hashes
    /// of the executable and resources: the slow part of `create`, 1.9 MB of busybox about
    /// 1.4 ms here).
    func checkContents(limits: BundleLimits) throws {
        let (manifest, problems) = try BundleManifest.read(
            bundleAt: bundle.path, layout: bundle.layout, limits: limits)
        let differences = signature.map { manifest.diff(against: $0.resources) } ?? []
        try Self.refuse(bundle, signed: signature != nil, problems + differences)
    }

    private static func refuse(_ bundle: AppBundle, signed: Bool, _ problems: [BundleProblem])
        throws
    {
        guard !problems.isEmpty else { return }
        // The problems themselves follow the message once, as the error's `problems` (the
        // first three are printed, then a count).
        let count = problems.count == 1 ? "1 problem" : "\(problems.count) problems"
        throw AppdError(
            .invalidBundle,
            signed
                ? "\(bundle.directoryName) does not match its code signature (\(count))"
                : "\(bundle.directoryName) is not a valid app bundle (\(count))",
            problems: problems)
    }
}
