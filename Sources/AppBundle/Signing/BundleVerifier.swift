import AppdBase
import Foundation

/// The one verification of a bundle. Install, `appd verify` (of a bundle and of an image),
/// appd-oci's `create` and the launch-time integrity check all go through it, so "verified as
/// install verifies it" is this code and not a convention kept in four places.
///
/// It lives in AppBundle, below the state root: it reads and never writes, and needs neither
/// the registry nor the configuration. What it asks of the outside comes in as values: the
/// bundle limits, the host its programs must run on (`ProgramHost`, Sandbox's `HostLibraries`)
/// and the `[Signer]` policy (`SignerPolicy`, appd.conf's `SigningPolicy`).
///
/// Two steps, so that a caller may run the slow one alongside other work (appd-oci's `create`
/// hashes while the launcher builds the sandbox), and nothing of the bundle may run before
/// both passed:
/// 1. `verifyMetadata`: what names the bundle and its rights. Its Info.plist and
///    Entitlements.plist, the signature verified over CodeResources, those two files against
///    their hashes in it, its programs on `host`, then the signer policy. Cheap: a few small
///    files and the programs' ELF headers.
/// 2. `verifyContents`: every file against the signature, hashed now or as it was copied.
/// `verify(at:)` does both at once and reports every problem of the tree together.
public struct BundleVerifier {
    public var limits: BundleLimits
    /// Where the bundle's programs must run; nil: not checked (`appd verify` reports them).
    public var host: (any ProgramHost)?
    /// Who may sign what; nil: not asked (`appd verify` reports what it would decide).
    public var policy: (any SignerPolicy)?

    public init(
        limits: BundleLimits, host: (any ProgramHost)? = nil, policy: (any SignerPolicy)? = nil
    ) {
        self.limits = limits
        self.host = host
        self.policy = policy
    }

    /// Step 1 for the bundle at `path`. Throws `invalidBundle` for a bundle that does not read,
    /// a signature that does not verify, an Info.plist or Entitlements.plist that is not the
    /// signed one, a program that cannot run on `host`; `permissionDenied` from the policy.
    public func verifyMetadata(at path: String) throws -> VerifiedBundle {
        let bundle = try AppBundle.open(at: path, limits: limits)
        let (signature, problems) = try bundle.checkSignedMetadata(limits: limits)
        try Self.refuse(bundle, signed: signature != nil, problems)
        var verified = VerifiedBundle(bundle: bundle, signature: signature)
        try checkHost(verified.bundle)
        try authorize(&verified)
        return verified
    }

    /// Step 2: every file of the tree as it is now against the signature (the hashes of the
    /// executable and resources, the slow part), and names that clash; `manifest` is set.
    public func verifyContents(_ verified: inout VerifiedBundle) throws {
        let (manifest, problems) = try BundleManifest.read(
            bundleAt: verified.bundle.path, layout: verified.bundle.layout, limits: limits)
        try seal(&verified, manifest, problems: problems)
    }

    /// Step 2 for a tree hashed while it was written (install's copy, the daemon's extraction):
    /// `hashed` holds what was seen, which must be what the signature covers.
    public func verifyContents(_ verified: inout VerifiedBundle, hashed: ManifestBuilder) throws {
        let (manifest, clashes) = hashed.finish()
        guard clashes.isEmpty else {
            throw AppdError(
                .invalidBundle, "has names that clash",
                subject: .init(.bundle, view: verified.bundle.path), problems: clashes)
        }
        try seal(&verified, manifest, problems: [])
    }

    /// Both steps, every problem of the tree reported together (`appd verify`): the signature,
    /// then the whole tree against it, then the host and the policy if they were given.
    public func verify(at path: String) throws -> VerifiedBundle {
        let bundle = try AppBundle.open(at: path, limits: limits)
        let check = try bundle.checkSignature(limits: limits)
        try Self.refuse(bundle, signed: check.signature != nil, check.problems)
        var verified = VerifiedBundle(
            bundle: bundle, signature: check.signature, manifest: check.manifest)
        try checkHost(verified.bundle)
        try authorize(&verified)
        return verified
    }

    /// Asks the policy, if there is one, and keeps its decision in `verified`.
    public func authorize(_ verified: inout VerifiedBundle) throws {
        guard let policy else { return }
        let bundle = verified.bundle
        verified.decision = try policy.authorize(
            signature: verified.signature, bundleID: bundle.info.identifier.rawValue,
            entitlements: bundle.entitlements, hostExecutables: bundle.info.hostExecutables,
            handlers: bundle.info.handlers)
    }

    /// The launch-time integrity check of an installed (sealed) bundle: its tree at `path`
    /// hashed again and compared with `sealedDigest`, the `BundleManifest.digest` taken at
    /// install. Returns nil when it is the same, else what differs: file by file when its
    /// CodeResources is still the one installed (`codeResourcesDigest`), else one problem
    /// saying the tree differs. An entry no bundle may hold is a change too.
    public func changes(
        sinceSealed sealedDigest: [UInt8], at path: String, layout: BundleLayout,
        codeResourcesDigest: [UInt8]?
    ) throws -> [BundleProblem]? {
        let (manifest, problems) = try BundleManifest.read(
            bundleAt: path, layout: layout, limits: limits)
        guard !problems.isEmpty || manifest.digest != sealedDigest else { return nil }
        guard problems.isEmpty else { return problems }
        if let codeResourcesDigest,
            let signature = try? CodeSignature.read(bundleAt: path, layout: layout),
            signature.codeResourcesDigest == codeResourcesDigest
        {
            let changes = manifest.diff(against: signature.resources)
            if !changes.isEmpty { return changes }
        }
        return [BundleProblem("", "the tree's SHA-256 differs from the one recorded at install")]
    }

    private func checkHost(_ bundle: AppBundle) throws {
        // The app runs on the host's /usr: another CPU's bundle, or one needing a library the
        // host lacks, is refused here rather than by the loader.
        guard let host else { return }
        try bundle.checkRuns(on: host)
    }

    private func seal(
        _ verified: inout VerifiedBundle, _ manifest: BundleManifest, problems: [BundleProblem]
    ) throws {
        let differences = verified.signature.map { manifest.diff(against: $0.resources) } ?? []
        try Self.refuse(verified.bundle, signed: verified.signature != nil, problems + differences)
        verified.manifest = manifest
    }

    /// The one refusal of a tree: the problems follow the message once, as the error's
    /// `problems` (a one-line error prints the first three, then a count). Its subject is the
    /// bundle, seen where the verifier read it; a caller shows it where its reader has it.
    static func refuse(_ bundle: AppBundle, signed: Bool, _ problems: [BundleProblem]) throws {
        guard !problems.isEmpty else { return }
        let count = problems.count == 1 ? "1 problem" : "\(problems.count) problems"
        throw AppdError(
            .invalidBundle,
            signed
                ? "does not match its code signature (\(count))"
                : "not a valid app bundle (\(count))",
            subject: .init(.bundle, view: bundle.path), problems: problems)
    }
}

/// A bundle as `BundleVerifier` found it: what install records, `appd verify` prints and
/// appd-oci launches.
public struct VerifiedBundle: Sendable {
    public var bundle: AppBundle
    /// Its signature, verified over its CodeResources; nil: unsigned.
    public var signature: CodeSignature?
    /// What the signer policy decided; nil when it was not asked.
    public var decision: SigningDecision?
    /// The tree as hashed, matching `signature`; nil until its contents were verified.
    public var manifest: BundleManifest?

    public init(
        bundle: AppBundle, signature: CodeSignature?, decision: SigningDecision? = nil,
        manifest: BundleManifest? = nil
    ) {
        self.bundle = bundle
        self.signature = signature
        self.decision = decision
        self.manifest = manifest
    }
}

/// The `[Signer]` policy as the verifier asks it (docs/code-signing.md): whether `signature`
/// (nil: unsigned) may carry `bundleID`, `entitlements`, the host programs its Info.plist
/// names and the URL schemes and document types it claims (`handlers`). appd.conf's `SigningPolicy` is the one there is; it lives with the configuration.
public protocol SignerPolicy: Sendable {
    func authorize(
        signature: CodeSignature?, bundleID: String, entitlements: Entitlements,
        hostExecutables: [String], handlers: BundleHandlers
    ) throws -> SigningDecision
}

/// Who signed a bundle, as the signer policy decided.
public struct SigningDecision: Sendable, Equatable {
    /// nil for an unsigned app accepted under `AllowUnsigned=yes`.
    public var keyID: String?
    /// The `[Signer]` sections that allowed it.
    public var signerNames: [String]
    /// For an unsigned install: the loud warning to log and show.
    public var warning: String?
    /// The application-group ids the app uses, as its entitlements spell them; each is granted
    /// by the policy. Whether another key already owns one is the registry's to say
    /// (`AppStore.checkGroupOwners`).
    public var groups: [String] = []

    public init(keyID: String?, signerNames: [String], warning: String?, groups: [String] = []) {
        self.keyID = keyID
        self.signerNames = signerNames
        self.warning = warning
        self.groups = groups
    }
}
