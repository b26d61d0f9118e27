import AppdAPI
import AppdBase

/// The file-sharing routes of docs/api.md ("File sharing"): an app's Documents, for apps whose
/// Info.plist has `UIFileSharingEnabled` = YES. `path` is relative to Documents.
extension AppdClient {
    /// `GET /v1/apps/{id}/files`: what Documents holds.
    public func files(_ id: String) throws(AppdError) -> APIFileList {
        try get(Self.path("apps", id, "files"))
    }

    /// `GET /v1/apps/{id}/files/content?path=P`: the file's bytes, handed to `onData` as they
    /// arrive.
    public func downloadFile(
        _ id: String, path: String, onData: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        try stream(
            Self.path("apps", id, "files", "content", query: ["path": path]),
            accept: "application/octet-stream", onData: onData)
    }

    /// `POST /v1/apps/{id}/files/content?path=P`: the bytes `body` writes become the file.
    public func uploadFile(_ id: String, path: String, body produce: BodyProducer) throws
        -> APIFileChange
    {
        try upload(
            Self.path("apps", id, "files", "content", query: ["path": path]),
            contentType: "application/octet-stream", body: produce)
    }

    /// `DELETE /v1/apps/{id}/files/content?path=P`
    public func removeFile(_ id: String, path: String) throws(AppdError) -> APIFileChange {
        try delete(Self.path("apps", id, "files", "content", query: ["path": path]))
    }
}
