import AppBundle
import AppdBase
import Foundation

extension SigningPolicy {
    /// Decides whether `signature` (nil: unsigned) may install `bundleID` with `entitlements`
    /// the host programs its Info.plist names (`hostExecutables`, AppdHostExecutables) and the
    /// URL schemes and document types it claims (`handlers`). Throws `permissionDenied` naming
    /// the reason: unsigned, untrusted key, a signer not allowed for this id, the entitlement
    /// keys the signer may not grant (all of them), the host programs it may not grant (all of
    /// them, each interpreter said so), or the schemes and types it may not grant (all of them,
    /// naming the Info.plist key).
    public func authorize(
        signature: CodeSignature?, bundleID: String, entitlements: Entitlements,
        hostExecutables: [String] = [], handlers: BundleHandlers = BundleHandlers()
    ) throws -> SigningDecision {
        let requested = entitlements.values.keys.filter { !Self.alwaysAllowed.contains($0) }
            .sorted()
        guard let signature else {
            guard allowUnsigned else {
                throw AppdError(
                    .permissionDenied,
                    "\(bundleID) is not signed; appd installs signed bundles only",
                    hint:
                        "sign it (appd keygen, appd sign --key KEY Name.app) with a key trusted in a [Signer] section of appd.conf; for development only, [Signing] AllowUnsigned=yes"
                )
            }
            let forbidden = requested.filter { key in
                !unsignedEntitlements.contains { Self.matches($0, key, ignoringCase: false) }
            }
            try refuse(
                forbidden, bundleID: bundleID,
                by: "an unsigned app ([Signing] UnsignedEntitlements)")
            let groups = try Self.groups(entitlements, bundleID: bundleID)
            try refuseGroups(
                groups.filter { id in
                    !unsignedGroups.contains { Self.matches($0, id, ignoringCase: true) }
                },
                bundleID: bundleID, by: "an unsigned app ([Signing] UnsignedGroups)",
                hint: "an admin lists the ids an unsigned app may use in [Signing] UnsignedGroups=")
            try refuseHostExecutables(
                hostExecutables.filter { path in
                    !unsignedHostExecutables.contains {
                        Self.matches($0, path, ignoringCase: false)
                    }
                },
                bundleID: bundleID, by: "an unsigned app ([Signing] UnsignedHostExecutables)")
            try refuseHandlers(
                handlers, bundleID: bundleID, by: "an unsigned app",
                schemes: unsignedURLSchemes, documentTypes: unsignedDocumentTypes,
                keys: ("[Signing] UnsignedURLSchemes=", "[Signing] UnsignedDocumentTypes="))
            return SigningDecision(
                keyID: nil, signerNames: [],
                warning:
                    "\(bundleID) is NOT SIGNED and was accepted only because [Signing] AllowUnsigned=yes; never use that setting outside development",
                groups: groups)
        }
        let keyed = signers.filter { $0.key == signature.publicKey }
        guard !keyed.isEmpty else {
            throw AppdError(
                .permissionDenied,
                "\(bundleID) is signed by key \(signature.keyID), which this host does not trust",
                hint: "an admin trusts a key with a [Signer NAME] section (Key=) in appd.conf")
        }
        let applicable = keyed.filter { signer in
            signer.bundleIDs.contains { Self.matches($0, bundleID, ignoringCase: true) }
        }
        guard !applicable.isEmpty else {
            let allowed = keyed.map {
                "[Signer \($0.name)] BundleIDs=\($0.bundleIDs.joined(separator: " "))"
            }
            throw AppdError(
                .permissionDenied,
                "key \(signature.keyID) may not sign \(bundleID): \(allowed.joined(separator: "; "))"
            )
        }
        let forbidden = requested.filter { key in
            !applicable.contains { signer in
                signer.entitlements.contains { Self.matches($0, key, ignoringCase: false) }
            }
        }
        let names = applicable.map(\.name)
        let whom =
            "signer \(names.map { "'\($0)'" }.joined(separator: ", ")) (key \(signature.keyID))"
        try refuse(forbidden, bundleID: bundleID, by: whom)
        let groups = try Self.groups(entitlements, bundleID: bundleID)
        try refuseGroups(
            groups.filter { id in
                !applicable.contains { signer in
                    signer.groups.contains { Self.matches($0, id, ignoringCase: true) }
                }
            }, bundleID: bundleID, by: whom,
            hint:
                "an admin grants a signer its group ids with Groups= in its [Signer] section of appd.conf, e.g. Groups=group.com.example.*"
        )
        try refuseHostExecutables(
            hostExecutables.filter { path in
                !applicable.contains { signer in
                    signer.hostExecutables.contains { Self.matches($0, path, ignoringCase: false) }
                }
            }, bundleID: bundleID, by: whom)
        try refuseHandlers(
            handlers, bundleID: bundleID, by: whom,
            schemes: applicable.flatMap(\.urlSchemes),
            documentTypes: applicable.flatMap(\.documentTypes),
            keys: ("URLSchemes= of the signer", "DocumentTypes= of the signer"))
        return SigningDecision(
            keyID: signature.keyID, signerNames: names, warning: nil, groups: groups)
    }

    /// Whether the policy in force lets the app `bundleID` signed by `keyID` (nil: unsigned)
    /// execute the host program `path`: what install checked, asked again at each launch.
    public func allowsHostExecutable(_ path: String, keyID: String?, bundleID: String) -> Bool {
        grants(
            path, keyID: keyID, bundleID: bundleID, unsigned: unsignedHostExecutables,
            signer: \.hostExecutables, ignoringCase: false)
    }

    /// Whether the policy in force lets the app `bundleID` signed by `keyID` (nil: unsigned)
    /// claim the URL scheme `scheme` (`CFBundleURLTypes`): what install checked, asked again at
    /// each `appctl open`, so a grant taken away by a reload takes the claim with it.
    public func allowsURLScheme(_ scheme: String, keyID: String?, bundleID: String) -> Bool {
        grants(
            scheme, keyID: keyID, bundleID: bundleID, unsigned: unsignedURLSchemes,
            signer: \.urlSchemes, ignoringCase: true)
    }

    /// Whether `item` matches a pattern of `unsigned` (an unsigned app, when they are allowed)
    /// or of the `signer` list of a signer with key `keyID` that may sign `bundleID`.
    private func grants(
        _ item: String, keyID: String?, bundleID: String, unsigned: [String],
        signer patterns: KeyPath<Signer, [String]>, ignoringCase: Bool
    ) -> Bool {
        guard let keyID else {
            return allowUnsigned
                && unsigned.contains { Self.matches($0, item, ignoringCase: ignoringCase) }
        }
        return signers.contains { signer in
            signer.key?.keyID == keyID
                && signer.bundleIDs.contains { Self.matches($0, bundleID, ignoringCase: true) }
                && signer[keyPath: patterns].contains {
                    Self.matches($0, item, ignoringCase: ignoringCase)
                }
        }
    }

    /// Refuses the host programs `whom` may not grant, all of them, saying which are
    /// interpreters (an app allowed one may run code that was never signed).
    private func refuseHostExecutables(_ refused: [String], bundleID: String, by whom: String)
        throws
    {
        guard !refused.isEmpty else { return }
        let named = refused.map {
            HostExecutables.isInterpreter($0)
                ? "\($0) (an interpreter: it runs code that was never signed)" : $0
        }
        throw AppdError(
            .permissionDenied,
            "\(bundleID) names host programs in \(HostExecutables.infoKey) (Info.plist) that \(whom) may not grant: \(named.joined(separator: ", "))",
            hint:
                "remove them from AppdHostExecutables, or an admin allows them with HostExecutables= of the signer in appd.conf"
        )
    }

    /// Refuses the URL schemes (`CFBundleURLTypes`) and document types
    /// (`CFBundleDocumentTypes`: MIME types, `.ext` extensions) that `whom` may not grant,
    /// all of them, naming the key.
    private func refuseHandlers(
        _ handlers: BundleHandlers, bundleID: String, by whom: String, schemes: [String],
        documentTypes: [String], keys: (schemes: String, types: String)
    ) throws {
        let refusedSchemes = handlers.schemes.filter { scheme in
            !schemes.contains { Self.matches($0, scheme, ignoringCase: true) }
        }
        if !refusedSchemes.isEmpty {
            throw AppdError(
                .permissionDenied,
                "\(bundleID) claims URL schemes in \(BundleHandlers.urlTypesKey) (Info.plist) that \(whom) may not grant: \(refusedSchemes.joined(separator: ", "))",
                hint:
                    "remove them from CFBundleURLTypes, or an admin allows them with \(keys.schemes) in appd.conf"
            )
        }
        let refusedTypes = handlers.documentClaims.filter { claim in
            !documentTypes.contains { Self.matches($0, claim, ignoringCase: true) }
        }
        if !refusedTypes.isEmpty {
            throw AppdError(
                .permissionDenied,
                "\(bundleID) claims document types in \(BundleHandlers.documentTypesKey) (Info.plist) that \(whom) may not grant: \(refusedTypes.joined(separator: ", "))",
                hint:
                    "remove them from CFBundleDocumentTypes, or an admin allows them with \(keys.types) in appd.conf (MIME types and .ext extensions)"
            )
        }
    }

    /// The group ids of `com.apple.security.application-groups`, each checked to look like a
    /// bundle id: they name directories and registry rows, and patterns match them.
    static func groups(_ entitlements: Entitlements, bundleID: String) throws -> [String] {
        let ids = entitlements.strings(EntitlementCatalog.applicationGroups)
        for id in ids where (try? BundleIdentifier(validating: id)) == nil {
            throw AppdError(
                .invalidBundle,
                "\(bundleID): application group \(String(id.prefix(200)).debugDescription) is not a valid group id",
                hint: "group ids look like bundle ids, e.g. group.com.example.shared")
        }
        var seen = Set<String>()
        return ids.filter { seen.insert($0.lowercased()).inserted }
    }

    private func refuseGroups(_ refused: [String], bundleID: String, by whom: String, hint: String)
        throws
    {
        guard !refused.isEmpty else { return }
        throw AppdError(
            .permissionDenied,
            "\(bundleID) uses application groups that \(whom) may not use: \(refused.joined(separator: ", "))",
            hint: hint)
    }

    /// iOS refuses the same way (0xE8008016, "entitlements not valid"): listing every key.
    private func refuse(_ forbidden: [String], bundleID: String, by whom: String) throws {
        guard !forbidden.isEmpty else { return }
        throw AppdError(
            .permissionDenied,
            "\(bundleID) requests entitlements that \(whom) may not grant: \(forbidden.joined(separator: ", "))",
            hint:
                "remove them from Entitlements.plist, or an admin adds them to Entitlements= of the signer in appd.conf"
        )
    }
}
