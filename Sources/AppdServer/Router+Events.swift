import AppdAPI
import AppdBase
import Foundation
import Supervisor

extension Router {
    /// Every lifecycle event as one JSON line, until the client goes away. With `since=SEQ`
    /// (or the header `Last-Event-ID: SEQ`) first the events after SEQ that appd still holds,
    /// with `since=TIME` (RFC 3339) those at or after TIME; a `gap` event says when some asked
    /// for are gone, or when this client read so slowly that some were dropped.
    func events(_ request: Request) throws -> Reply {
        let start = try Self.eventStart(
            request.query["since"] ?? request.headers.first(name: "Last-Event-ID"))
        let (replay, stream) = supervisor.events(after: start)
        return .stream(contentType: "application/x-ndjson") { writer in
            let encoder = APICoding.encoder()
            var last: Int?
            func send(_ event: APIEvent) async throws {
                var line = try encoder.encode(event)
                line.append(0x0A)
                try await writer.write(line)
            }
            for event in replay {
                try await send(event)
                last = event.seq
            }
            for await event in stream {
                if let last, event.seq > last + 1 {
                    try await send(EventHub.dropped(from: last + 1, to: event.seq - 1))
                }
                try await send(event)
                last = event.seq
            }
        }
    }

    /// `since`: a seq (0 and up), or an RFC 3339 time; absent: from now.
    static func eventStart(_ value: String?) throws -> EventHub.Start {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else {
            return .now
        }
        if value.utf8.allSatisfy({ (48...57).contains($0) }) {
            guard let seq = Int(value) else {
                throw AppdError(.badRequest, "since '\(value.prefix(40))' is not an event seq")
            }
            return .after(seq: seq)
        }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        guard let date = formatter.date(from: value) ?? ISO8601DateFormatter().date(from: value)
        else {
            throw AppdError(
                .badRequest, "since '\(value.prefix(40))' is neither an event seq nor a time",
                hint:
                    "give the seq of the last event seen (as Last-Event-ID) or RFC 3339 (2026-11-24T10:00:00Z)"
            )
        }
        return .time(date)
    }
}
