import AppBundle
import AppdBase

/// `[Handlers]`: the admin's choice of the app that opens a URL scheme or a document type,
/// before the rule (docs/info-plist.md, "Which app opens it"), as mimeapps.list's
/// `[Default Applications]`. The app named must still claim the item in its signed Info.plist;
/// one that does not (or is not installed) is passed over for the rule.
public struct HandlerSettings: Sendable, Equatable {
    /// Scheme (lowercased) → app.
    public var urlSchemes: [String: AppID] = [:]
    /// Document type → app: a MIME type (`text/plain`) or an extension with its dot (`.txt`),
    /// lowercased.
    public var documentTypes: [String: AppID] = [:]

    public init() {}

    /// The app the admin chose for `scheme`, or nil.
    public func app(forScheme scheme: String) -> AppID? { urlSchemes[scheme.lowercased()] }

    /// The app the admin chose for a file of extension `ext` (its `.ext` entry first) or of
    /// MIME type `mimeType`, or nil.
    public func app(forExtension ext: String?, mimeType: String?) -> AppID? {
        if let ext, let app = documentTypes["." + ext.lowercased()] { return app }
        if let mimeType, let app = documentTypes[mimeType.lowercased()] { return app }
        return nil
    }
}

extension ConfigValue where Value == [String: AppID] {
    /// `NAME=ID` entries, space-separated: each name checked by `name` (nil: well formed),
    /// lowercased, each ID a bundle id.
    static func choices(of what: String, _ name: @escaping @Sendable (String) -> Bool)
        -> ConfigValue
    {
        ConfigValue("entries \(what)=ID, space-separated (ID a bundle id)") { text in
            var result: [String: AppID] = [:]
            for word in ConfigText.words(text) {
                let parts = word.split(separator: "=", maxSplits: 1).map(String.init)
                guard parts.count == 2, name(parts[0]),
                    (try? BundleIdentifier(validating: parts[1])) != nil
                else { return nil }
                result[parts[0].lowercased()] = AppID(parts[1])
            }
            return result
        }
    }
}

extension ConfigKey {
    static let handlers: [ConfigKey] = [
        .key(
            .handlers, "URLSchemes",
            .choices(of: "SCHEME") { BundleHandlers.schemeProblem($0) == nil },
            \.handlers.urlSchemes, "the app that opens each URL scheme"),
        .key(
            .handlers, "DocumentTypes",
            .choices(of: "TYPE") { type in
                type.hasPrefix(".")
                    ? BundleHandlers.extensionProblem(String(type.dropFirst())) == nil
                    : BundleHandlers.mimeProblem(type) == nil
            },
            \.handlers.documentTypes, "the app that opens each document type (MIME type, .ext)"),
    ]
}
