import AppdAPI
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
        // What the app wrote before this request is in the log before the files are opened.
        let instance = try await supervisor.instance(id)
        if instance.state != .exited, let launcher = instance.pid {
            await InstanceLogs.settle(launcher: launcher)
        }
        let files = try await supervisor.logFiles(id)
        let follow = request.flag("follow")
        let supervisor = supervisor
        let limit = files.maxBytes
        return .stream(contentType: "text/plain; charset=utf-8") { writer in
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            guard let currentPath = files.paths.last else { return }
            let olderPaths = Array(files.paths.dropLast())
            let older = olderPaths.map { open($0, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
            defer { for fd in older where fd >= 0 { close(fd) } }
            var log = LogFile(path: currentPath)
            defer { log.close() }
            let all = older + [log.fd]
            let paths = olderPaths + [currentPath]
            // An index is looked for under the file's own name, then (the current file, rotated
            // since it was opened) under the rotated one.
            let indexes = zip(all, paths).map { fd, path in
                LogTimeIndex(forLog: fd, candidates: [path + ".idx", currentPath + ".1.idx"])
            }
            // Where to start: the beginning, the last `tail` lines, the first line at or after
            // `since`, whichever is latest.
            var start = (file: 0, offset: Int64(0))
            if let tail { start = Self.tailStart(all, lines: tail, limit: limit) }
            if let since {
                let from = Self.sinceStart(all, indexes: indexes, since: since, limit: limit)
                if (from.file, from.offset) > (start.file, start.offset) { start = from }
            }
            var stamper = LineStamper(timestamps: timestamps)
            for (index, fd) in older.enumerated() where fd >= 0 && index >= start.file {
                stamper.index = indexes[index]
                stamper.atLineStart = true
                _ = try await Self.copy(
                    fd, from: index == start.file ? start.offset : 0, limit: limit, into: writer,
                    buffer: &buffer,
                    stamper: &stamper)
            }
            let currentIndex = indexes.last ?? nil
            stamper.index = currentIndex
            stamper.atLineStart = true
            let offset = try await Self.copy(
                log.fd, from: start.file == older.count ? start.offset : 0, limit: limit,
                into: writer,
                buffer: &buffer, stamper: &stamper)
            guard follow else { return }
            try await Self.follow(
                id, log: &log, path: currentPath, from: offset, index: currentIndex,
                supervisor: supervisor, limit: limit, into: writer, buffer: &buffer,
                stamper: &stamper)
        }
    }

    /// Sends what is added to the instance's current log from `offset` on, as it is written,
    /// until the instance has exited and everything was sent (`logs?follow=1`, an attached
    /// launch). The relay rotates by rename: the file being followed is read to its end, then
    /// the new one from its start.
    static func follow(
        _ id: String, log: inout LogFile, path currentPath: String, from start: Int64,
        index: LogTimeIndex?, supervisor: Supervisor, limit: Int64, into writer: some ByteSink,
        buffer: inout [UInt8], stamper: inout LineStamper
    ) async throws {
        var offset = start
        var currentIndex = index
        while true {
            let exited = try await supervisor.instance(id).state == .exited
            if stamper.timestamps, currentIndex == nil {
                // The relay makes the index right after the file: take it once it is there.
                currentIndex = LogTimeIndex(
                    forLog: log.fd, candidates: [currentPath + ".idx", currentPath + ".1.idx"])
                stamper.index = currentIndex
            }
            offset = try await Self.copy(
                log.fd, from: offset, limit: limit, into: writer, buffer: &buffer,
                stamper: &stamper)
            if log.replaced() {
                // Renamed to .1 by the relay, which writes only the new file from then on:
                // the rest of the old one, then the new one from its start.
                offset = try await Self.copy(
                    log.fd, from: offset, limit: limit, into: writer, buffer: &buffer,
                    stamper: &stamper)
                log.reopen()
                offset = 0
                if stamper.timestamps {
                    currentIndex = LogTimeIndex(forLog: log.fd, candidates: [currentPath + ".idx"])
                    stamper.index = currentIndex
                }
                stamper.atLineStart = true
                continue
            }
            if exited { return }
            // New output is looked for every 50 ms; the exit ends the wait at once, so the
            // stream ends as soon as the instance has (a console's client learns of the
            // exit when it happens, not up to a poll later).
            await supervisor.waitForExit(id, atMost: .milliseconds(50))
            try Task.checkCancellation()
        }
    }

    /// The log file being followed, held open so that a rename does not lose its end.
    struct LogFile {
        let path: String
        private(set) var fd: Int32 = -1
        private var inode: ino_t = 0

        init(path: String) {
            self.path = path
            reopen()
        }

        mutating func reopen() {
            close()
            fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            var info = stat()
            inode = fd >= 0 && fstat(fd, &info) == 0 ? info.st_ino : 0
        }

        /// Another file has the name now (or one has it at last).
        func replaced() -> Bool {
            var info = stat()
            guard lstat(path, &info) == 0 else { return false }
            return fd < 0 || info.st_ino != inode
        }

        mutating func close() {
            if fd >= 0 { Glibc.close(fd) }
            fd = -1
        }
    }

    /// `tail=N`: at most 100,000 lines (a log holds at most 2 x LogMaxBytes anyway).
    static func tailLines(_ value: String?) throws -> Int? {
        guard let value else { return nil }
        guard let lines = Int(value), (0...100_000).contains(lines) else {
            throw APIFailure.badRequest(
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
            throw APIFailure(
                400, "badRequest", "since '\(value.prefix(40))' is not a time",
                hint: "give RFC 3339 (2026-11-24T10:00:00Z) or seconds since the epoch")
        }
        return Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
    }

    /// Where the first line read at or after `since` begins: the file's index and the offset in
    /// it; the end of the last file when every line is older. A file without an index has
    /// unknown times: it is shown whole rather than hidden.
    static func sinceStart(_ fds: [Int32], indexes: [LogTimeIndex?], since: Int64, limit: Int64)
        -> (file: Int, offset: Int64)
    {
        for (file, fd) in fds.enumerated() where fd >= 0 {
            var info = stat()
            let size = fstat(fd, &info) == 0 ? min(Int64(info.st_size), limit) : 0
            guard let index = indexes[file] else { return (file, 0) }
            guard let offset = index.firstOffset(atOrAfter: since), offset < size else { continue }
            return (file, lineStart(fd, atOrAfter: offset, size: size))
        }
        let last = max(0, fds.count - 1)
        var info = stat()
        let size =
            fds.last.map { $0 >= 0 && fstat($0, &info) == 0 ? min(Int64(info.st_size), limit) : 0 }
            ?? 0
        return (last, size)
    }

    /// `offset` if a line starts there, else just after the next newline (a record in the middle
    /// of a long line's pieces: that line began earlier).
    static func lineStart(_ fd: Int32, atOrAfter offset: Int64, size: Int64) -> Int64 {
        guard offset > 0 else { return 0 }
        var position = offset - 1
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while position < size {
            let wanted = Int(min(Int64(buffer.count), size - position))
            let count = buffer.withUnsafeMutableBytes {
                pread(fd, $0.baseAddress, wanted, off_t(position))
            }
            guard count > 0 else { return size }
            if let newline = buffer[..<count].firstIndex(of: 0x0A) {
                return position + Int64(newline) + 1
            }
            position += Int64(count)
        }
        return size
    }

    /// Where the last `lines` lines of the files (oldest first; -1 for a missing one) begin:
    /// the file's index and the offset in it. Read backwards in 64 KiB steps, at most `limit`
    /// of each file. The newline that ends the very last line does not start one.
    static func tailStart(_ fds: [Int32], lines: Int, limit: Int64) -> (file: Int, offset: Int64) {
        let sizes = fds.map { fd -> Int64 in
            var info = stat()
            guard fd >= 0, fstat(fd, &info) == 0 else { return 0 }
            return min(Int64(info.st_size), limit)
        }
        guard let last = fds.indices.last else { return (0, 0) }
        if lines == 0 { return (last, sizes[last]) }
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        var boundaries = 0
        var atVeryEnd = true
        for index in fds.indices.reversed() where sizes[index] > 0 {
            var end = sizes[index]
            while end > 0 {
                let start = max(0, end - Int64(buffer.count))
                let wanted = Int(end - start)
                let count = buffer.withUnsafeMutableBytes {
                    pread(fds[index], $0.baseAddress, wanted, off_t(start))
                }
                guard count == wanted else { return (0, 0) }
                for position in stride(from: count - 1, through: 0, by: -1) {
                    defer { atVeryEnd = false }
                    guard buffer[position] == 0x0A, !atVeryEnd else { continue }
                    boundaries += 1
                    if boundaries == lines { return (index, start + Int64(position) + 1) }
                }
                end = start
            }
        }
        return (0, 0)
    }

    /// Sends `fd` from `offset` to its end, or to `limit`; returns the new offset. No file
    /// (-1) is empty.
    static func copy(
        _ fd: Int32, from offset: Int64, limit: Int64, into writer: some ByteSink,
        buffer: inout [UInt8],
        stamper: inout LineStamper
    ) async throws -> Int64 {
        guard fd >= 0 else { return offset }
        var position = offset
        while position < limit {
            let wanted = Int(min(Int64(buffer.count), limit - position))
            let count = buffer.withUnsafeMutableBytes {
                pread(fd, $0.baseAddress, wanted, off_t(position))
            }
            guard count > 0 else { return position }
            if stamper.timestamps {
                try await writer.write(stamper.stamp(buffer[..<count], at: position))
            } else {
                try await writer.write(buffer[..<count])
            }
            position += Int64(count)
        }
        return position
    }
}

/// Puts the time each line was read in front of it (`2026-11-24T10:00:00.123456Z `), as the
/// bytes go by: no line is held whole, however long.
struct LineStamper {
    let timestamps: Bool
    var index: LogTimeIndex?
    var atLineStart = true

    init(timestamps: Bool) { self.timestamps = timestamps }

    /// `bytes` read from `offset` of the file, with a time before each line that starts in it.
    mutating func stamp(_ bytes: ArraySlice<UInt8>, at offset: Int64) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 64)
        var start = bytes.startIndex
        while start < bytes.endIndex {
            if atLineStart {
                let time = index?.time(at: offset + Int64(start - bytes.startIndex))
                out += Self.format(time)
                atLineStart = false
            }
            if let newline = bytes[start...].firstIndex(of: 0x0A) {
                out += bytes[start...newline]
                start = newline + 1
                atLineStart = true
            } else {
                out += bytes[start...]
                start = bytes.endIndex
            }
        }
        return out
    }

    /// RFC 3339 in UTC with microseconds and a space; dashes of the same width when the time is
    /// unknown (a log written before the relay kept times).
    static func format(_ microseconds: Int64?) -> [UInt8] {
        guard let microseconds else { return Array("-".utf8) + [UInt8](repeating: 0x20, count: 27) }
        var seconds = time_t(microseconds.dividedReportingOverflow(by: 1_000_000).partialValue)
        var fraction = microseconds % 1_000_000
        if fraction < 0 {
            fraction += 1_000_000
            seconds -= 1
        }
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return format(nil) }
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        let text =
            "\(pad(Int(parts.tm_year) + 1900, 4))-\(pad(Int(parts.tm_mon) + 1, 2))-\(pad(Int(parts.tm_mday), 2))T"
            + "\(pad(Int(parts.tm_hour), 2)):\(pad(Int(parts.tm_min), 2)):\(pad(Int(parts.tm_sec), 2))."
            + "\(pad(Int(fraction), 6))Z "
        return Array(text.utf8)
    }
}
