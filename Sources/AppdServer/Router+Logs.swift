import AppdAPI
import AppdBase
import Foundation
import Glibc
import Supervisor

extension Router {
    /// The instance's output from the start (the rotated part first); with `tail=N` only the
    /// last N lines, with `since=TIME` only lines read at or after TIME, with `timestamps=1`
    /// each line prefixed by the time the relay read it; with `follow=1` new output as it is
    /// written, until the instance has exited and everything was sent. The relay rotates by
    /// rename: the file being followed is read to its end, then the new one from its start. At
    /// most the log's bound is read from each file.
    func logs(_ id: String, _ request: Request) async throws -> Reply {
        let tail = try Self.tailLines(request.query["tail"])
        let since = try Self.sinceTime(request.query["since"])
        let timestamps = request.flag("timestamps")
        let follow = request.flag("follow")
        // What the app wrote before this request is in the log before the files are opened.
        let reader = try await LogReader(id, of: supervisor, settle: true)
        return .stream(contentType: "text/plain; charset=utf-8") { writer in
            try await reader.read(
                tail: tail, since: since, timestamps: timestamps, follow: follow, into: writer)
        }
    }

    /// `tail=N`: at most 100,000 lines (a log holds at most 2 x LogMaxBytes anyway).
    static func tailLines(_ value: String?) throws -> Int? {
        guard let value else { return nil }
        guard let lines = Int(value), (0...100_000).contains(lines) else {
            throw AppdError(
                .badRequest,
                "tail '\(value.prefix(20))' is not a number of lines from 0 to 100000")
        }
        return lines
    }

    /// `since=TIME`: RFC 3339 (`2026-11-24T10:00:00Z`, fractions and offsets allowed) or
    /// seconds since the epoch; microseconds since the epoch. Relative times (`10m`) are the
    /// client's to resolve: the daemon's clock is not the client's.
    static func sinceTime(_ value: String?) throws -> Int64? {
        guard let value else { return nil }
        if let seconds = Double(value), seconds.isFinite, (0...4_102_444_800).contains(seconds) {
            return Int64((seconds * 1_000_000).rounded())
        }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let plain = ISO8601DateFormatter()
        guard let date = formatter.date(from: value) ?? plain.date(from: value),
            (0...4_102_444_800).contains(date.timeIntervalSince1970)
        else {
            throw AppdError(
                .badRequest, "since '\(value.prefix(40))' is not a time",
                hint: "give RFC 3339 (2026-11-24T10:00:00Z) or seconds since the epoch")
        }
        return Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
    }
}

/// A streamed answer takes a log as it is read (LogReader).
extension StreamWriter: LogSink {}
