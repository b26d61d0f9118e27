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

    /// Verifies the bundle at `path` as install does and checks `args[0]` names its executable.
    static func verify(at path: String, args: [String], config: AppdConfiguration) throws
        -> AppImage
    {
        let bundle = try AppBundle.open(at: path, limits: config.bundleLimits)
        let check = try bundle.checkSignature(limits: config.bundleLimits)
        guard check.problems.isEmpty else {
            let first = check.problems.first.map { ": \($0)" } ?? ""
            throw AppdError(
                .invalidBundle,
                check.signature == nil
                    ? "\(bundle.directoryName) is not a valid app bundle (\(check.problems.count) problems)\(first)"
                    : "\(bundle.directoryName) does not match its code signature (\(check.problems.count) problems)\(first)",
                problems: check.problems)
        }
        let id = bundle.info.identifier.rawValue
        let decision = try config.signing.authorize(
            signature: check.signature, bundleID: id, entitlements: bundle.entitlements)
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
        return AppImage(bundle: bundle, decision: decision, arguments: Array(args.dropFirst()))
    }
}
