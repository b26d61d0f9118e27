import AppdAPI
import Foundation

extension AppdClient {
    /// `POST /v1/apps/{id}/backup`: the app's backup as a tar stream, handed to `onData` as it
    /// arrives (`live`: without freezing its instances; `groups`: with the containers of its
    /// application groups). A stream the daemon broke off is an
    /// error here (its chunked framing never ended); the caller also checks that the summary
    /// ends it (`BackupFormat.summary(fromTail:)`).
    public func backup(
        _ id: String, live: Bool = false, groups: Bool = false,
        onData: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        try stream(
            Self.path(
                "apps", id, "backup",
                query: ["live": live ? "1" : nil, "groups": groups ? "1" : nil]), method: "POST",
            accept: "application/x-tar", onData: onData)
    }

    /// `POST /v1/apps/{id}/restore`: the backup `body` writes, restored into the installed app
    /// (`groups`: and the group containers it holds).
    public func restore(
        _ id: String, allowSignerChange: Bool = false, groups: Bool = false,
        body produce: BodyProducer
    ) throws -> APIRestoreResult {
        try upload(
            Self.path(
                "apps", id, "restore",
                query: [
                    "allowSignerChange": allowSignerChange ? "1" : nil,
                    "groups": groups ? "1" : nil,
                ]),
            contentType: "application/x-tar", body: produce)
    }
}
