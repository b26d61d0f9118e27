#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `GET /v1/apps/{id}/files`: what an app that shares its files (`UIFileSharingEnabled`) holds
/// in Documents (`appctl files ID`).
public struct APIFileList: Codable, Sendable, Equatable {
    public var app: String
    public var files: [APIFileEntry]
    /// false: the listing stopped at its bound (10,000 entries or two seconds); there is more.
    public var complete: Bool

    public init(app: String, files: [APIFileEntry], complete: Bool) {
        self.app = app
        self.files = files
        self.complete = complete
    }
}

/// One entry of Documents, by its path relative to it.
public struct APIFileEntry: Codable, Sendable, Equatable {
    public var path: String
    /// `file`, `directory`, `link` (never followed) or `other` (a FIFO, a socket).
    public var kind: String
    /// Bytes, for a file.
    public var size: Int64
    public var modified: Date

    public init(path: String, kind: String, size: Int64, modified: Date) {
        self.path = path
        self.kind = kind
        self.size = size
        self.modified = modified
    }
}

/// The answer to a put (`POST /v1/apps/{id}/files/content`) or a removal (`DELETE`).
public struct APIFileChange: Codable, Sendable, Equatable {
    public var app: String
    /// Relative to Documents.
    public var path: String
    /// `file`, `directory`, `link` or `other`: what was written or removed.
    public var kind: String
    /// Bytes written (a put).
    public var bytes: Int64?

    public init(app: String, path: String, kind: String, bytes: Int64? = nil) {
        self.app = app
        self.path = path
        self.kind = kind
        self.bytes = bytes
    }
}
