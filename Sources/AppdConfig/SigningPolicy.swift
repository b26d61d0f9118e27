import AppBundle

/// `[Signing]` and the `[Signer NAME]` sections of appd.conf: whose signatures appd trusts and
/// which entitlements each signer may grant, to which bundle ids — the analogue of iOS
/// provisioning profiles (docs/code-signing.md).
public struct SigningPolicy: Sendable, Equatable {
    /// Install bundles without a signature. For development only: every such install is
    /// logged as a warning.
    public var allowUnsigned = false
    /// What an unsigned app may be granted when `allowUnsigned` is on.
    public var unsignedEntitlements: [String] = ["*"]
    /// Application-group ids an unsigned app may use (patterns, like a signer's `Groups`).
    /// Empty by default: without a key there is no owner to bind a group to, so an unsigned
    /// app gets a group only where the admin names it.
    public var unsignedGroups: [String] = []
    /// Host programs an unsigned app may name in `AppdHostExecutables` (patterns, like a
    /// signer's `HostExecutables`). Empty by default: an unsigned app runs no host program.
    public var unsignedHostExecutables: [String] = []
    /// URL schemes an unsigned app may claim in `CFBundleURLTypes` (patterns, like a signer's
    /// `URLSchemes`). Empty by default.
    public var unsignedURLSchemes: [String] = []
    /// Document types (MIME types, `.ext` extensions) an unsigned app may claim in
    /// `CFBundleDocumentTypes` (patterns, like a signer's `DocumentTypes`). Empty by default.
    public var unsignedDocumentTypes: [String] = []
    public var signers: [Signer] = []
    /// At launch the whole bundle container is hashed and compared with what was installed
    /// when it holds at most this many bytes; a larger one has only its executable checked.
    /// 0: always only the executable.
    public var launchCheckMaxBytes: Int64 = 8 << 20

    /// One `[Signer NAME]` section. Several sections may name the same key (different bundle
    /// ids, different entitlements); what applies to a bundle is the union of the sections
    /// whose key signed it and whose `BundleIDs` match its id.
    public struct Signer: Sendable, Equatable {
        public var name: String
        public var key: SignerKey?
        /// Patterns: `*`, `com.example.*` (a prefix), or an exact id; compared without case.
        public var bundleIDs: [String] = ["*"]
        /// Patterns of entitlement keys this signer may grant (`*`, `com.apple.security.network.*`,
        /// exact keys). Empty: none but the sandbox itself.
        public var entitlements: [String] = []
        /// Patterns of application-group ids this signer may use (`group.com.example.*`), as a
        /// team's provisioning profile lists its groups. Empty: none, even when `Entitlements`
        /// allows the application-groups key.
        public var groups: [String] = []
        /// Patterns of host program paths (`/usr/bin/python3`, `/usr/bin/*`, `*`) this signer's
        /// apps may name in Info.plist's `AppdHostExecutables` (HostExecutables). Empty: none:
        /// its apps run only their bundle's executables.
        public var hostExecutables: [String] = []
        /// Patterns of the URL schemes (`notes`, `x-example-*`) its apps may claim in
        /// `CFBundleURLTypes`, compared without case. Empty: none, so that no app claims
        /// `https` unasked.
        public var urlSchemes: [String] = []
        /// Patterns of the document types its apps may claim in `CFBundleDocumentTypes`: each
        /// MIME type (`text/plain`, `image/*`) and each extension with its dot (`.txt`, `.*`),
        /// compared without case. Empty: none.
        public var documentTypes: [String] = []

        public init(name: String) { self.name = name }
    }

    public init() {}

    /// Asking to be sandboxed grants nothing, so every signer may "grant" it.
    public static let alwaysAllowed: Set<String> = ["com.apple.security.app-sandbox"]

    public static func matches(_ pattern: String, _ value: String, ignoringCase: Bool) -> Bool {
        EntitlementPattern.matches(pattern, value, ignoringCase: ignoringCase)
    }
}

/// The patterns of entitlement and bundle-id lists (`[Signer]`, `RevokeEntitlements=`): exact,
/// a prefix ending in `*`, or `*`.
public enum EntitlementPattern {
    public static func matches(_ pattern: String, _ value: String, ignoringCase: Bool) -> Bool {
        let (pattern, value) =
            ignoringCase ? (pattern.lowercased(), value.lowercased()) : (pattern, value)
        if pattern == "*" { return true }
        if pattern.hasSuffix("*") { return value.hasPrefix(pattern.dropLast()) }
        return pattern == value
    }
}
