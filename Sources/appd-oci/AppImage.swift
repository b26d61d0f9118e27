import AppBundle
import AppdBase
import AppdConfig
import Foundation
import Glibc
import Sandbox

/// The image convention (docs/oci-image.md): the root filesystem holds exactly one bundle,
/// `/Name.app`, and `process.args[0]` names its executable. At `create` the bundle is verified
/// by `AppImageCheck` (AppBundle) with install's `BundleVerifier`, the same check `appd verify`
/// makes of an image, against this node's appd.conf. Its entitlements then compile to the
/// profile a daemon launch gets.
struct AppImage {
    var check: AppImageCheck
    /// The arguments after the executable.
    var arguments: [String]

    var bundle: AppBundle { check.bundle }

    /// The one `Name.app` at the top of `rootfs`, or nil when there is none (a plain image).
    static func find(in rootfs: String) throws -> String? {
        try AppImageCheck.find(in: rootfs)
    }

    /// Verifies the bundle at `path` (AppImageCheck.verify on this node's /usr) and checks
    /// `args[0]` names its executable. The rest of the tree is `checkContents`, which `create`
    /// runs while the launcher builds the sandbox: it must pass before the app may start.
    static func verify(at path: String, args: [String], config: AppdConfiguration) throws
        -> AppImage
    {
        let check = try AppImageCheck.verify(
            at: path,
            with: BundleVerifier(
                config, host: try HostLibraries(systemPaths: config.sandbox.systemPaths)))
        return AppImage(
            check: check, arguments: try check.arguments(of: args, source: "process.args"))
    }

    mutating func checkContents(limits: BundleLimits) throws {
        try check.checkContents(limits: limits)
    }
}
