import AppdAPI
import Foundation
import Glibc
import LauncherProtocol

/// Where a log's bytes go: the answer to `GET /v1/instances/{id}/logs`, or the output frames
/// of an attached launch.
public protocol LogSink: Sendable {
    func write(_ bytes: some Collection<UInt8>) async throws
}

/// Reads an instance's log as the relay writes it (InstanceLogs, docs/app-output.md): the
/// rotated part and the current file, the last N lines (`tail`), the lines read at or after a
/// time (`since`, through the time index), each line with its time (`timestamps`), and new
/// output as it is written until the instance has exited (`follow`). The relay rotates by
/// rename: the file being followed is read to its end, then the new one from its start. At most
/// the log's bound (`maxBytes`) is read from each file. The HTTP routes only parse the request
/// and hand over the sink.
public struct LogReader: Sendable {
    /// The index of the rotated log (`NAME.1.idx`).
    static func rotatedIndex(of path: String) -> String {
        LogIndexLayout.indexName(ofLog: LogIndexLayout.rotatedName(ofLog: path))
    }

    public let instance: String
    let supervisor: Supervisor
    /// The log files, oldest first (the rotated one, then the current one).
    let paths: [String]
    /// How much of each file is read at most (the relay keeps them below it).
    public let maxBytes: Int64

    /// The reader of `id`'s log. `settle`: first wait until what the app wrote before now is in
    /// the log (InstanceLogs.settle), as a request for the log so far wants.
    public init(_ id: String, of supervisor: Supervisor, settle: Bool) async throws {
        if settle {
            let instance = try await supervisor.instance(id)
            if instance.state != .exited, let launcher = instance.pid {
                await InstanceLogs.settle(launcher: launcher)
            }
        }
        let files = try await supervisor.logFiles(id)
        self.instance = id
        self.supervisor = supervisor
        self.paths = files.paths
        self.maxBytes = files.maxBytes
    }

    /// The log from the start (the rotated part first); with `tail` only the last lines, with
    /// `since` (microseconds since the epoch) only lines read at or after it, with `timestamps`
    /// each line prefixed by the time the relay read it; with `follow` new output as it is
    /// written, until the instance has exited and everything was sent.
    public func read(
        tail: Int?, since: Int64?, timestamps: Bool, follow: Bool, into writer: some LogSink
    ) async throws {
        let limit = maxBytes
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        guard let currentPath = paths.last else { return }
        let olderPaths = Array(paths.dropLast())
        let older = olderPaths.map { open($0, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
        defer { for fd in older where fd >= 0 { close(fd) } }
        var log = LogFile(path: currentPath)
        defer { log.close() }
        let all = older + [log.fd]
        let paths = olderPaths + [currentPath]
        // An index is looked for under the file's own name, then (the current file, rotated
        // since it was opened) under the rotated one.
        let indexes = zip(all, paths).map { fd, path in
            LogTimeIndex(
                forLog: fd,
                candidates: [
                    LogIndexLayout.indexName(ofLog: path), Self.rotatedIndex(of: currentPath),
                ])
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
        try await self.follow(
            log: &log, path: currentPath, from: offset, index: currentIndex, into: writer,
            buffer: &buffer, stamper: &stamper)
    }

    /// Everything from the start of the log, then what is written until the instance has
    /// exited, in pieces of at most `pieceSize` bytes (an attached launch: each piece is one
    /// frame). The current file is opened first: a rotation while the older one is read is seen
    /// as one.
    public func followFromStart(pieceSize: Int, into writer: some LogSink) async throws {
        guard let path = paths.last else { return }
        var log = LogFile(path: path)
        defer { log.close() }
        var buffer = [UInt8](repeating: 0, count: pieceSize)
        var stamper = LineStamper(timestamps: false)
        // A chatty app may have filled the log and had it rotated already.
        for older in paths.dropLast() {
            let fd = open(older, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            // Rotated after `log` was opened: the file is `log` itself, followed below.
            var mine = stat()
            var theirs = stat()
            if log.fd >= 0, fstat(log.fd, &mine) == 0, fstat(fd, &theirs) == 0,
                mine.st_ino == theirs.st_ino, mine.st_dev == theirs.st_dev
            {
                continue
            }
            _ = try await Self.copy(
                fd, from: 0, limit: maxBytes, into: writer, buffer: &buffer, stamper: &stamper)
        }
        try await follow(
            log: &log, path: path, from: 0, index: nil, into: writer, buffer: &buffer,
            stamper: &stamper)
    }

    /// Sends what is added to the instance's current log from `offset` on, as it is written,
    /// until the instance has exited and everything was sent (`logs?follow=1`, an attached
    /// launch). The relay rotates by rename: the file being followed is read to its end, then
    /// the new one from its start.
    func follow(
        log: inout LogFile, path currentPath: String, from start: Int64,
        index: LogTimeIndex?, into writer: some LogSink,
        buffer: inout [UInt8], stamper: inout LineStamper
    ) async throws {
        var offset = start
        var currentIndex = index
        while true {
            let exited = try await supervisor.instance(instance).state == .exited
            if stamper.timestamps, currentIndex == nil {
                // The relay makes the index right after the file: take it once it is there.
                currentIndex = LogTimeIndex(
                    forLog: log.fd,
                    candidates: [
                        LogIndexLayout.indexName(ofLog: currentPath),
                        Self.rotatedIndex(of: currentPath),
                    ])
                stamper.index = currentIndex
            }
            offset = try await Self.copy(
                log.fd, from: offset, limit: maxBytes, into: writer, buffer: &buffer,
                stamper: &stamper)
            if log.replaced() {
                // Renamed to .1 by the relay, which writes only the new file from then on:
                // the rest of the old one, then the new one from its start.
                offset = try await Self.copy(
                    log.fd, from: offset, limit: maxBytes, into: writer, buffer: &buffer,
                    stamper: &stamper)
                log.reopen()
                offset = 0
                if stamper.timestamps {
                    currentIndex = LogTimeIndex(
                        forLog: log.fd, candidates: [LogIndexLayout.indexName(ofLog: currentPath)])
                    stamper.index = currentIndex
                }
                stamper.atLineStart = true
                continue
            }
            if exited { return }
            // New output is looked for every 50 ms; the exit ends the wait at once, so the
            // stream ends as soon as the instance has (a console's client learns of the
            // exit when it happens, not up to a poll later).
            await supervisor.waitForExit(instance, atMost: .milliseconds(50))
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
        _ fd: Int32, from offset: Int64, limit: Int64, into writer: some LogSink,
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
