import AppBundle

extension BundleVerifier {
    /// The verifier an appd.conf makes: its bundle limits and its `[Signer]` policy, the
    /// programs checked on `host` (nil: not checked).
    public init(_ config: AppdConfiguration, host: (any ProgramHost)?) {
        self.init(limits: config.bundleLimits, host: host, signing: config.signing)
    }

    /// A verifier asking `signing`, appd.conf's `[Signer]` policy, what install would decide.
    public init(limits: BundleLimits, host: (any ProgramHost)? = nil, signing: SigningPolicy) {
        self.init(limits: limits, host: host, policy: ConfiguredSigners(policy: signing))
    }
}

/// appd.conf's `SigningPolicy` (AppdConfig) as the verifier's `SignerPolicy` (AppBundle): the
/// decision is `SigningPolicy.authorize` (SigningPolicy+Authorize.swift).
private struct ConfiguredSigners: SignerPolicy {
    let policy: SigningPolicy

    func authorize(
        signature: CodeSignature?, bundleID: String, entitlements: Entitlements,
        hostExecutables: [String], handlers: BundleHandlers
    ) throws -> SigningDecision {
        try policy.authorize(
            signature: signature, bundleID: bundleID, entitlements: entitlements,
            hostExecutables: hostExecutables, handlers: handlers)
    }
}
