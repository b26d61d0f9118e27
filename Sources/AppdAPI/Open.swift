import AppdBase

/// `POST /v1/open` (`appctl open`): an item, a URL or an absolute path, to be opened by the app
/// that claims it (docs/api.md, "Opening URLs and files").
public struct OpenRequest: Codable, Sendable {
    /// A URL (`notes:today`) or an absolute path.
    public var item: String
    /// The app to open it with; it must claim the item.
    public var with: String?
    /// A file given read-only even to an Editor.
    public var readOnly: Bool

    public init(item: String, with: String? = nil, readOnly: Bool = false) {
        self.item = item
        self.with = with
        self.readOnly = readOnly
    }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        item = try container.decode(String.self, forKey: .item)
        with = try container.decodeIfPresent(String.self, forKey: .with)
        readOnly = try container.decodeIfPresent(Bool.self, forKey: .readOnly) ?? false
    }

    enum CodingKeys: String, CodingKey { case item, with, readOnly }
}

/// What `POST /v1/open` did: the app chosen and why, and the instance that got the item.
public struct APIOpenResult: Codable, Sendable, Equatable {
    /// `url` or `file`.
    public var kind: String
    public var item: String
    public var app: String
    /// `named` (`--with`), `[Handlers]` (the admin's choice), or `rule` (docs/info-plist.md,
    /// "Which app opens it").
    public var chosenBy: String
    /// The new instance, launched with the item as its last argument.
    public var instance: APIInstance
    /// What the caller should know (a running instance was not handed the item, ...).
    public var note: String?

    public init(
        kind: String, item: String, app: String, chosenBy: String, instance: APIInstance,
        note: String?
    ) {
        self.kind = kind
        self.item = item
        self.app = app
        self.chosenBy = chosenBy
        self.instance = instance
        self.note = note
    }
}
