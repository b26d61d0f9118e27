import AppdBase
import Foundation
import Glibc

/// The one check of an appd image's bundle (docs/oci-image.md), for appd-oci's `create` and
/// `appd verify` of an image alike, so a CI job or an admission check gets the answer create
/// would give (issue 37): the root filesystem holds exactly one bundle, `/Name.app`; it is
/// verified by install's `BundleVerifier`, made by the caller from an appd.conf and a host: its
/// code signature, the programs it carries against a host's /usr, then the `[Signer]` policy
/// (unsigned refused unless `AllowUnsigned=yes`, entitlements the signer may not grant
/// refused); the entrypoint names its executable; and every file matches its signature
/// (`checkContents`, which create runs while the launcher builds the sandbox). In AppBundle, so
/// that what checks an image needs no state root.
public struct AppImageCheck {
    /// The image's `User` that `appd image` writes: `nobody`, a numeric uid that is not root,
    /// so a pod with `runAsNonRoot` is admitted (the kubelet refuses an image whose user is
    /// empty, 0 or a name). appd-oci never runs an app as it: the app runs as its bundle id's
    /// node uid (docs/oci-runtime.md, "Who the app runs as"). An engine that runs the image as
    /// it chowns a new named volume to it (podman), so appd-oci takes a volume owned by it when
    /// config.json's user is this one (DataPlace).
    public static let imageUser: UInt32 = 65534
    /// The bundle, its signature and the policy's decision, as `BundleVerifier` found them.
    public var verified: VerifiedBundle

    public var bundle: AppBundle { verified.bundle }
    /// Its signature, verified over its CodeResources (nil: unsigned, and allowed).
    public var signature: CodeSignature? { verified.signature }
    /// What the `[Signer]` policy decided (nil: the verifier was given no policy).
    public var decision: SigningDecision? { verified.decision }

    /// The one `Name.app` at the top of `rootfs`, or nil when there is none (a plain image).
    /// More than one is refused: which app runs must not depend on directory order.
    public static func find(in rootfs: String) throws -> String? {
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

    /// Verifies what names the bundle at `path` and its rights with `verifier`, install's
    /// (`BundleVerifier.verifyMetadata`: its signature, its Info.plist and Entitlements.plist
    /// against it, its programs on the verifier's host, its `[Signer]` policy). The rest of the
    /// tree is `checkContents`.
    public static func verify(at path: String, with verifier: BundleVerifier) throws
        -> AppImageCheck
    {
        do {
            return AppImageCheck(verified: try verifier.verifyMetadata(at: path))
        } catch let error as AppdError {
            // The bundle as the image has it: `/Name.app`.
            throw error.viewing(.bundle, as: "/" + (path as NSString).lastPathComponent)
        }
    }

    /// `/Name.app/<CFBundleExecutable>`: what the entrypoint must be.
    public var executable: String { "/\(bundle.directoryName)/\(bundle.executablePath)" }

    /// Checks that `args[0]` (config.json's `process.args`, which the engines make of the
    /// image's Entrypoint and Cmd) names the executable; returns the arguments after it.
    /// `source`: what holds `args`, for the message.
    public func arguments(of args: [String], source: String) throws -> [String] {
        guard let first = args.first else {
            throw AppdError(
                .invalidConfig, "\(source) has no arguments; the app's is \(executable)")
        }
        guard "/" + first.split(separator: "/").joined(separator: "/") == executable else {
            throw AppdError(
                .permissionDenied,
                "\(source)[0] is \(first), not the bundle's executable \(executable)",
                hint: "an appd image runs its bundle's executable (appd image sets the entrypoint)")
        }
        return Array(args.dropFirst())
    }

    /// Every file of the bundle against its signature, as `appd install` checks it
    /// (`BundleVerifier.verifyContents`: the hashes of the executable and resources, the slow
    /// part of `create`, 1.9 MB of busybox about 1.4 ms here).
    public mutating func checkContents(limits: BundleLimits) throws {
        do {
            try BundleVerifier(limits: limits).verifyContents(&verified)
        } catch let error as AppdError {
            throw error.viewing(.bundle, as: "/" + bundle.directoryName)
        }
    }
}
