import PrintableText

/// What an app says it opens, from its signed Info.plist (docs/info-plist.md, "URL schemes and
/// document types"): the URL schemes of `CFBundleURLTypes` and the documents of
/// `CFBundleDocumentTypes`, each with its role. Read and validated when the bundle is opened
/// (every count and length capped; a malformed entry refuses the install, naming the key and
/// its index), and granted by the signer: `[Signer] URLSchemes=` and `DocumentTypes=`
/// (SigningPolicy), so that no app claims `https` or `text/plain` unasked.
public struct BundleHandlers: Sendable, Equatable, Codable {
    public var urlTypes: [URLType] = []
    public var documentTypes: [DocumentType] = []

    public init(urlTypes: [URLType] = [], documentTypes: [DocumentType] = []) {
        self.urlTypes = urlTypes
        self.documentTypes = documentTypes
    }

    /// One entry of `CFBundleURLTypes`.
    public struct URLType: Sendable, Equatable, Codable {
        /// `CFBundleURLName`, a name for people (reverse-DNS by custom), or nil.
        public var name: String?
        /// `CFBundleURLSchemes`, lowercased (schemes compare without case, RFC 3986).
        public var schemes: [String]

        public init(name: String? = nil, schemes: [String]) {
            self.name = name
            self.schemes = schemes
        }
    }

    /// One entry of `CFBundleDocumentTypes`.
    public struct DocumentType: Sendable, Equatable, Codable {
        /// `CFBundleTypeName`, or nil.
        public var name: String?
        public var role: Role
        /// `CFBundleTypeExtensions` and those of the known `LSItemContentTypes`, lowercased,
        /// without their dot.
        public var extensions: [String]
        /// `CFBundleTypeMIMETypes` and those of the known `LSItemContentTypes`, lowercased.
        public var mimeTypes: [String]
        /// `LSItemContentTypes` as written; those appd does not know add nothing.
        public var contentTypes: [String]

        public init(
            name: String? = nil, role: Role, extensions: [String], mimeTypes: [String],
            contentTypes: [String] = []
        ) {
            self.name = name
            self.role = role
            self.extensions = extensions
            self.mimeTypes = mimeTypes
            self.contentTypes = contentTypes
        }
    }

    /// `CFBundleTypeRole`: an Editor is given the file read-write, a Viewer read-only; None
    /// declares the type without opening it (never chosen as its handler).
    public enum Role: String, Sendable, Codable, CaseIterable {
        case editor = "Editor"
        case viewer = "Viewer"
        case none = "None"
    }

    public static let urlTypesKey = "CFBundleURLTypes"
    public static let documentTypesKey = "CFBundleDocumentTypes"
    /// Entries of each array, and items of each list inside an entry.
    public static let maxEntries = 32
    public static let maxItems = 32
    public static let maxNameBytes = 255
    public static let maxSchemeBytes = 64
    public static let maxExtensionBytes = 32
    public static let maxMIMEBytes = 127

    /// Every scheme claimed, lowercased, in order, each once.
    public var schemes: [String] { Self.unique(urlTypes.flatMap(\.schemes)) }
    /// Every extension claimed (without its dot), each once.
    public var extensions: [String] { Self.unique(documentTypes.flatMap(\.extensions)) }
    /// Every MIME type claimed, each once.
    public var mimeTypes: [String] { Self.unique(documentTypes.flatMap(\.mimeTypes)) }
    /// What `[Signer] DocumentTypes=` is matched against: each MIME type, and each extension
    /// with its dot (`.txt`).
    public var documentClaims: [String] { mimeTypes + extensions.map { "." + $0 } }
    public var isEmpty: Bool { urlTypes.isEmpty && documentTypes.isEmpty }

    /// The strongest role this app declares for `item`'s extension or MIME type (an Editor
    /// over a Viewer), or nil when it claims neither; a `None` role never handles.
    public func role(forExtension ext: String?, mimeType: String?) -> Role? {
        let ext = ext?.lowercased()
        let mime = mimeType?.lowercased()
        let roles = documentTypes.filter { type in
            (ext.map { type.extensions.contains($0) } ?? false)
                || (mime.map { type.mimeTypes.contains($0) } ?? false)
        }.map(\.role)
        if roles.contains(.editor) { return .editor }
        if roles.contains(.viewer) { return .viewer }
        return nil
    }

    /// Whether the app claims the URL scheme `scheme` (compared without case).
    public func claims(scheme: String) -> Bool { schemes.contains(scheme.lowercased()) }

    /// The validated handlers of `raw`'s `CFBundleURLTypes` and `CFBundleDocumentTypes`; each
    /// problem is appended, naming the key and the entry's index (an install with any is
    /// refused).
    public static func read(in raw: [String: PlistValue], problems: inout [String]) -> Self {
        var handlers = BundleHandlers()
        for (index, entry) in entries(urlTypesKey, in: raw, problems: &problems) {
            let place = "\(urlTypesKey)[\(index)]"
            let name = optionalName("CFBundleURLName", in: entry, place: place, &problems)
            let schemes = list(
                "CFBundleURLSchemes", in: entry, place: place, required: true,
                check: schemeProblem, &problems)
            handlers.urlTypes.append(URLType(name: name, schemes: schemes))
        }
        for (index, entry) in entries(documentTypesKey, in: raw, problems: &problems) {
            let place = "\(documentTypesKey)[\(index)]"
            let name = optionalName("CFBundleTypeName", in: entry, place: place, &problems)
            var role = Role.viewer
            switch entry["CFBundleTypeRole"] {
            case nil: break
            case .string(let text):
                if let known = Role(rawValue: text) {
                    role = known
                } else {
                    problems.append(
                        "\(place).CFBundleTypeRole '\(Printable(String(text.prefix(64))))' is not Editor, Viewer or None"
                    )
                }
            case let other?:
                problems.append(
                    "\(place).CFBundleTypeRole must be a string, not a \(other.typeName)")
            }
            var extensions = list(
                "CFBundleTypeExtensions", in: entry, place: place, required: false,
                check: extensionProblem, &problems)
            var mimeTypes = list(
                "CFBundleTypeMIMETypes", in: entry, place: place, required: false,
                check: mimeProblem, &problems)
            let contentTypes = list(
                "LSItemContentTypes", in: entry, place: place, required: false,
                check: contentTypeProblem, &problems)
            for uti in contentTypes {
                guard let known = ContentTypes.known[uti.lowercased()] else { continue }
                extensions += known.extensions
                mimeTypes += known.mimeTypes
            }
            extensions = unique(extensions)
            mimeTypes = unique(mimeTypes)
            if extensions.isEmpty && mimeTypes.isEmpty {
                problems.append(
                    "\(place) names no extension, MIME type or known content type (CFBundleTypeExtensions, CFBundleTypeMIMETypes, LSItemContentTypes)"
                )
            }
            handlers.documentTypes.append(
                DocumentType(
                    name: name, role: role, extensions: extensions, mimeTypes: mimeTypes,
                    contentTypes: contentTypes))
        }
        return handlers
    }

    // MARK: - Reading

    private static func entries(
        _ key: String, in raw: [String: PlistValue], problems: inout [String]
    ) -> [(Int, [String: PlistValue])] {
        guard let value = raw[key] else { return [] }
        guard case .array(let items) = value else {
            problems.append("\(key) must be an array of dictionaries, not a \(value.typeName)")
            return []
        }
        guard items.count <= maxEntries else {
            problems.append("\(key) has \(items.count) entries; at most \(maxEntries)")
            return []
        }
        var result: [(Int, [String: PlistValue])] = []
        for (index, item) in items.enumerated() {
            guard case .dictionary(let entry) = item else {
                problems.append("\(key)[\(index)] must be a dictionary, not a \(item.typeName)")
                continue
            }
            result.append((index, entry))
        }
        return result
    }

    private static func optionalName(
        _ key: String, in entry: [String: PlistValue], place: String, _ problems: inout [String]
    ) -> String? {
        switch entry[key] {
        case nil: return nil
        case .string(let name):
            if name.utf8.count > maxNameBytes {
                problems.append("\(place).\(key) is over \(maxNameBytes) bytes")
            } else if let control = Printable.firstControl(in: name) {
                problems.append(
                    "\(place).\(key) holds the control character \(Printable.codePoint(control))")
            } else {
                return name
            }
            return nil
        case let other?:
            problems.append("\(place).\(key) must be a string, not a \(other.typeName)")
            return nil
        }
    }

    /// The lowercased strings of `entry[key]`, an array of strings, each checked by `check`.
    private static func list(
        _ key: String, in entry: [String: PlistValue], place: String, required: Bool,
        check: (String) -> String?, _ problems: inout [String]
    ) -> [String] {
        guard let value = entry[key] else {
            if required { problems.append("\(place) has no \(key)") }
            return []
        }
        guard case .array(let items) = value else {
            problems.append("\(place).\(key) must be an array of strings, not a \(value.typeName)")
            return []
        }
        guard items.count <= maxItems else {
            problems.append("\(place).\(key) has \(items.count) items; at most \(maxItems)")
            return []
        }
        if required && items.isEmpty { problems.append("\(place).\(key) is empty") }
        var result: [String] = []
        for (index, item) in items.enumerated() {
            guard case .string(let text) = item else {
                problems.append(
                    "\(place).\(key)[\(index)] must be a string, not a \(item.typeName)")
                continue
            }
            if let why = check(text) {
                problems.append(
                    "\(place).\(key)[\(index)] '\(Printable(String(text.prefix(80))))' \(why)")
            } else {
                result.append(key == "LSItemContentTypes" ? text : text.lowercased())
            }
        }
        return unique(result)
    }

    // MARK: - The shape of each item

    /// RFC 3986: a letter, then letters, digits, `+`, `-`, `.`.
    public static func schemeProblem(_ scheme: String) -> String? {
        guard !scheme.isEmpty, scheme.utf8.count <= maxSchemeBytes else {
            return "is not 1 to \(maxSchemeBytes) bytes"
        }
        let bytes = Array(scheme.utf8)
        guard isLetter(bytes[0]),
            bytes.allSatisfy({
                isLetter($0) || isDigit($0) || $0 == 0x2B || $0 == 0x2D || $0 == 0x2E
            })
        else { return "is not a URL scheme (a letter, then letters, digits, '+', '-', '.')" }
        return nil
    }

    /// A file name's last part: letters, digits, `-`, `_`, `+`, `.` inside; no leading dot.
    public static func extensionProblem(_ ext: String) -> String? {
        guard !ext.isEmpty, ext.utf8.count <= maxExtensionBytes else {
            return "is not 1 to \(maxExtensionBytes) bytes"
        }
        let bytes = Array(ext.utf8)
        guard bytes[0] != 0x2E, bytes.last != 0x2E,
            bytes.allSatisfy({
                isLetter($0) || isDigit($0) || $0 == 0x2D || $0 == 0x5F || $0 == 0x2B || $0 == 0x2E
            })
        else {
            return
                "is not a file extension (letters, digits, '-', '_', '+', '.' inside; no leading dot, no '*')"
        }
        return nil
    }

    /// `type/subtype`, each an RFC 6838 restricted name.
    public static func mimeProblem(_ mime: String) -> String? {
        guard mime.utf8.count <= maxMIMEBytes else { return "is over \(maxMIMEBytes) bytes" }
        let parts = mime.split(separator: "/", omittingEmptySubsequences: false)
        let name: (Substring) -> Bool = { part in
            guard let first = part.utf8.first, isLetter(first) || isDigit(first) else {
                return false
            }
            return part.utf8.allSatisfy {
                isLetter($0) || isDigit($0) || "!#$&-^_.+".utf8.contains($0)
            }
        }
        guard parts.count == 2, name(parts[0]), name(parts[1]) else {
            return "is not a MIME type (type/subtype, no wildcard)"
        }
        return nil
    }

    /// A uniform type identifier: reverse-DNS letters, digits, `-`, `.`.
    public static func contentTypeProblem(_ uti: String) -> String? {
        guard !uti.isEmpty, uti.utf8.count <= maxNameBytes else {
            return "is not 1 to \(maxNameBytes) bytes"
        }
        guard uti.utf8.allSatisfy({ isLetter($0) || isDigit($0) || $0 == 0x2D || $0 == 0x2E })
        else { return "is not a type identifier (letters, digits, '-', '.')" }
        return nil
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    }
    private static func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }

    static func unique(_ items: [String]) -> [String] {
        var seen = Set<String>()
        return items.filter { seen.insert($0).inserted }
    }
}

/// The uniform type identifiers appd knows, each with the extensions and MIME types it stands
/// for (as Apple's UTType declarations give them). An `LSItemContentTypes` entry naming another
/// claims nothing.
public enum ContentTypes {
    public struct Known: Sendable {
        public let extensions: [String]
        public let mimeTypes: [String]
    }

    public static let known: [String: Known] = [
        "public.plain-text": Known(extensions: ["txt", "text"], mimeTypes: ["text/plain"]),
        "public.utf8-plain-text": Known(extensions: ["txt", "text"], mimeTypes: ["text/plain"]),
        "public.json": Known(extensions: ["json"], mimeTypes: ["application/json"]),
        "public.png": Known(extensions: ["png"], mimeTypes: ["image/png"]),
        "public.jpeg": Known(extensions: ["jpg", "jpeg"], mimeTypes: ["image/jpeg"]),
        "com.compuserve.gif": Known(extensions: ["gif"], mimeTypes: ["image/gif"]),
        "com.adobe.pdf": Known(extensions: ["pdf"], mimeTypes: ["application/pdf"]),
        "public.pdf": Known(extensions: ["pdf"], mimeTypes: ["application/pdf"]),
        "public.html": Known(extensions: ["html", "htm"], mimeTypes: ["text/html"]),
        "public.xml": Known(extensions: ["xml"], mimeTypes: ["application/xml", "text/xml"]),
        "public.comma-separated-values-text": Known(
            extensions: ["csv"], mimeTypes: ["text/csv"]),
        "public.tab-separated-values-text": Known(
            extensions: ["tsv"], mimeTypes: ["text/tab-separated-values"]),
        "net.daringfireball.markdown": Known(
            extensions: ["md", "markdown"], mimeTypes: ["text/markdown"]),
        "public.yaml": Known(extensions: ["yaml", "yml"], mimeTypes: ["application/yaml"]),
        "public.svg-image": Known(extensions: ["svg"], mimeTypes: ["image/svg+xml"]),
        "org.webmproject.webp": Known(extensions: ["webp"], mimeTypes: ["image/webp"]),
        "public.mp3": Known(extensions: ["mp3"], mimeTypes: ["audio/mpeg"]),
        "public.mpeg-4": Known(extensions: ["mp4"], mimeTypes: ["video/mp4"]),
        "com.apple.property-list": Known(
            extensions: ["plist"], mimeTypes: ["application/x-plist"]),
        "public.zip-archive": Known(extensions: ["zip"], mimeTypes: ["application/zip"]),
    ]

    /// The MIME type of a file named `name` by its extension, when a known type has it.
    public static func mimeType(forExtension ext: String) -> String? {
        let ext = ext.lowercased()
        return known.values.first { $0.extensions.contains(ext) }?.mimeTypes.first
    }
}

extension InfoPlist {
    /// `CFBundleURLTypes` and `CFBundleDocumentTypes` (validated when the bundle was opened).
    public var handlers: BundleHandlers {
        var ignored: [String] = []
        return BundleHandlers.read(in: raw, problems: &ignored)
    }
}

extension BundleHandlers {
    /// The handlers of an Info.plist already read by Foundation (an installed, sealed bundle's:
    /// checked at install), only the two keys converted; nil when they do not read.
    public static func read(foundation info: [String: Any]) -> Self? {
        var raw: [String: PlistValue] = [:]
        for key in [urlTypesKey, documentTypesKey] {
            guard let value = info[key] else { continue }
            guard let converted = try? PlistValue(foundation: value) else { return nil }
            raw[key] = converted
        }
        var problems: [String] = []
        let handlers = read(in: raw, problems: &problems)
        return problems.isEmpty ? handlers : nil
    }
}
