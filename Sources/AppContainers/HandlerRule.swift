import AppBundle
import AppdBase
import AppdConfig
import Foundation

/// What `appctl open` names: a URL, by its scheme, or a file, by its extension and MIME type.
public enum OpenItem: Sendable, Equatable {
    case url(String, scheme: String)
    case file(path: String, ext: String?, mimeType: String?)

    /// At most this many bytes (a URL or an absolute path).
    public static let maxBytes = 4096

    /// `scheme:rest` is a URL; an absolute path is a file. Anything else is refused, naming it.
    public init(_ text: String) throws {
        guard !text.isEmpty, text.utf8.count <= Self.maxBytes, !text.utf8.contains(0) else {
            throw AppdError(
                .badRequest,
                "the item to open must be a URL or an absolute path of 1 to \(Self.maxBytes) bytes")
        }
        if text.hasPrefix("/") {
            let name = text.split(separator: "/").last.map(String.init) ?? ""
            var ext: String?
            if let dot = name.lastIndex(of: "."), dot != name.startIndex,
                name.index(after: dot) != name.endIndex
            {
                ext = String(name[name.index(after: dot)...]).lowercased()
            }
            self = .file(
                path: text, ext: ext, mimeType: ext.flatMap(ContentTypes.mimeType(forExtension:)))
            return
        }
        guard let colon = text.firstIndex(of: ":"),
            BundleHandlers.schemeProblem(String(text[..<colon])) == nil
        else {
            throw AppdError(
                .badRequest,
                "the item to open is neither a URL (scheme:...) nor an absolute path",
                hint:
                    "appctl open makes a relative path absolute; a URL starts with its scheme, e.g. notes:today"
            )
        }
        guard text.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw AppdError(
                .badRequest, "a URL to open is printable ASCII without spaces (RFC 3986)",
                hint: "percent-encode other characters")
        }
        self = .url(text, scheme: text[..<colon].lowercased())
    }

    /// `the URL scheme notes:`, `files of type .txt (text/plain)`: what a message names.
    public var kindText: String {
        switch self {
        case .url(_, let scheme): "the URL scheme \(scheme):"
        case .file(_, let ext, let mime):
            "files "
                + ([ext.map { ".\($0)" }, mime].compactMap { $0 }.joined(separator: ", ")).ifEmpty(
                    "without an extension")
        }
    }

    public var text: String {
        switch self {
        case .url(let url, _): url
        case .file(let path, _, _): path
        }
    }
}

extension String {
    fileprivate func ifEmpty(_ other: String) -> String { isEmpty ? other : self }
}

/// An installed app that may open items: its id, when it was first installed, what it claims.
public struct HandlerCandidate: Sendable {
    public var id: AppID
    public var installedAt: Date
    public var handlers: BundleHandlers

    public init(id: AppID, installedAt: Date, handlers: BundleHandlers) {
        self.id = id
        self.installedAt = installedAt
        self.handlers = handlers
    }

    /// The role it claims `item` with (files: Editor or Viewer; URLs: nil when it claims the
    /// scheme), or `.none` when it does not claim it.
    func claim(_ item: OpenItem) -> BundleHandlers.Role? {
        switch item {
        case .url(_, let scheme): handlers.claims(scheme: scheme) ? .viewer : nil
        case .file(_, let ext, let mime): handlers.role(forExtension: ext, mimeType: mime)
        }
    }
}

/// The app that opens an item, and why it was chosen.
public struct HandlerChoice: Sendable, Equatable {
    public var app: AppID
    /// For a file: the role its Info.plist declares (Editor: read-write, Viewer: read-only).
    public var role: BundleHandlers.Role?
    /// `named`, `[Handlers]`, or `rule`.
    public var chosenBy: String
}

/// docs/info-plist.md, "Which app opens it": the app named (it must claim the item), else the
/// admin's `[Handlers]` (when that app claims it), else an Editor before a Viewer, then the app
/// installed first, then the bundle id.
public enum HandlerRule {
    public static func choose(
        _ item: OpenItem, among candidates: [HandlerCandidate], admin: HandlerSettings,
        named: AppID?
    ) throws -> HandlerChoice {
        let claiming = candidates.compactMap { candidate in
            candidate.claim(item).map { (candidate, $0) }
        }
        let isURL: Bool
        if case .url = item { isURL = true } else { isURL = false }
        func choice(_ pair: (HandlerCandidate, BundleHandlers.Role), _ by: String) -> HandlerChoice
        {
            HandlerChoice(app: pair.0.id, role: isURL ? nil : pair.1, chosenBy: by)
        }
        if let named {
            guard let found = claiming.first(where: { $0.0.id == named }) else {
                let key = isURL ? BundleHandlers.urlTypesKey : BundleHandlers.documentTypesKey
                throw AppdError(
                    .permissionDenied,
                    "\(named) does not open \(item.kindText): its Info.plist does not claim it (\(key))",
                    hint: "appctl info \(named) lists what it opens")
            }
            return choice(found, "named")
        }
        let adminChoice: AppID? =
            switch item {
            case .url(_, let scheme): admin.app(forScheme: scheme)
            case .file(_, let ext, let mime): admin.app(forExtension: ext, mimeType: mime)
            }
        if let adminChoice, let found = claiming.first(where: { $0.0.id == adminChoice }) {
            return choice(found, "[Handlers]")
        }
        let rank: (BundleHandlers.Role) -> Int = { $0 == .editor ? 0 : 1 }
        let ordered = claiming.sorted { a, b in
            if rank(a.1) != rank(b.1) { return rank(a.1) < rank(b.1) }
            if a.0.installedAt != b.0.installedAt { return a.0.installedAt < b.0.installedAt }
            return a.0.id.spelling.lowercased() < b.0.id.spelling.lowercased()
        }
        guard let first = ordered.first else {
            throw AppdError(
                .notFound, "no installed app opens \(item.kindText)",
                hint:
                    "an app claims it in its signed Info.plist (docs/info-plist.md, \"URL schemes and document types\")"
            )
        }
        return choice(first, "rule")
    }
}
