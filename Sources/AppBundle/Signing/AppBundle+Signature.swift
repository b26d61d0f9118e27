import AppdBase
import Crypto
import Foundation

/// A bundle's signature checked against its tree: what `appd verify` reports.
public struct SignatureCheck: Sendable {
    /// nil: the bundle is not signed.
    public let signature: CodeSignature?
    /// The tree as it is on disk now.
    public let manifest: BundleManifest
    /// Every file added, removed or changed since signing, and names that clash; empty when the
    /// signature covers exactly this tree.
    public let problems: [BundleProblem]
}

extension AppBundle {
    /// Reads the signature, hashes every file, and compares. Throws `invalidBundle` for a
    /// signature that is malformed or does not verify; tree differences are in `problems`.
    public func checkSignature(limits: BundleLimits) throws -> SignatureCheck {
        let signature = try CodeSignature.read(bundleAt: path, layout: layout)
        let (manifest, problems) = try BundleManifest.read(
            bundleAt: path, layout: layout, limits: limits)
        return SignatureCheck(
            signature: signature, manifest: manifest,
            problems: problems + (signature.map { manifest.diff(against: $0.resources) } ?? []))
    }

    /// The quick part of `checkSignature`, for a launch that runs the rest while the sandbox
    /// is built: the signature, verified over CodeResources, and the two files that say which
    /// app this is and what it may do (Info.plist, Entitlements.plist), each against the hash
    /// CodeResources gives it (absent where it lists none). Problems name those files only.
    /// Nothing of the bundle may run before the whole `checkSignature` passed.
    public func checkSignedMetadata(limits: BundleLimits) throws -> (
        signature: CodeSignature?, problems: [BundleProblem]
    ) {
        guard let signature = try CodeSignature.read(bundleAt: path, layout: layout) else {
            return (nil, [])
        }
        // The two files as they are and as signed, compared as install compares the tree.
        var now = BundleManifest()
        var signed = BundleManifest()
        for (file, maxBytes) in [
            (layout.infoPlistPath, limits.maxInfoPlistBytes),
            (layout.entitlementsPath, limits.maxEntitlementsBytes),
        ] {
            if let bytes = try CodeSignature.readInside(path, file, maxBytes: maxBytes) {
                now.entries[file] = .file(sha256: Array(SHA256.hash(data: bytes)))
            }
            signed.entries[file] = signature.resources.entries[file]
        }
        return (signature, now.diff(against: signed))
    }

    /// The `_CodeSignature/CodeResources` and `Signature` to write for this bundle as it is now.
    /// Refuses a tree with names that clash by case or Unicode normalization. Any signature
    /// files already there are left out of what is signed (they are replaced).
    public func sign(with identity: SigningIdentity, limits: BundleLimits) throws
        -> (manifest: BundleManifest, codeResources: Data, signature: Data)
    {
        let (manifest, problems) = try BundleManifest.read(
            bundleAt: path, layout: layout, limits: limits)
        guard problems.isEmpty else {
            throw AppdError(
                .invalidBundle, "cannot be signed", subject: .init(.bundle, view: path),
                problems: problems)
        }
        let (resources, signature) = try CodeSignature.sign(manifest, with: identity)
        return (manifest, resources, signature)
    }
}
