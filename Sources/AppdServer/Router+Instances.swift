import AppBundle
import AppdAPI
import Foundation
import Glibc
import Supervisor

extension Router {
    func launch(_ id: String, _ request: Request) async throws -> Reply {
        let body = try await request.decode(LaunchRequest.self, limit: maxRequestBytes)
        guard body.arguments.count <= 4096, body.arguments.allSatisfy({ !$0.contains("\0") }) else {
            throw APIFailure.badRequest("arguments: at most 4096, none containing NUL")
        }
        let (instance, timings) = try await supervisor.launchTimed(
            id, arguments: body.arguments, caller: request.caller.uid, background: body.background)
        // The daemon's stages of the launch (scripts/bench-launch prints them): cheap to measure,
        // free to ignore.
        return try .json(instance, status: 201, headers: [("Server-Timing", timings.serverTiming)])
    }

    func listInstances(_ request: Request) async throws -> Reply {
        if let app = request.query["app"] { _ = try store.app(app) }
        return try .json(await supervisor.instances(app: request.query["app"], includeExited: request.flag("all")))
    }

    /// The instance's output from the start (the rotated part first); with `follow=1` new
    /// output as it is written, until the instance has exited and everything was sent. The
    /// relay rotates by rename: the file being followed is read to its end, then the new one
    /// from its start. At most the log's bound is read from each file.
    func logs(_ id: String, _ request: Request) async throws -> Reply {
        let tail = try Self.tailLines(request.query["tail"])
        let files = try await supervisor.logFiles(id)
        let follow = request.flag("follow")
        let supervisor = supervisor
        let limit = files.maxBytes
        return .stream(contentType: "text/plain; charset=utf-8") { writer in
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            let older = files.paths.dropLast().map { open($0, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
            defer { for fd in older where fd >= 0 { close(fd) } }
            guard let current = files.paths.last else { return }
            var log = LogFile(path: current)
            defer { log.close() }
            // Where to start: the beginning, or the last `tail` lines across the files.
            let all = older + [log.fd]
            let start = tail.map { Self.tailStart(all, lines: $0, limit: limit) } ?? (file: 0, offset: 0)
            for (index, fd) in older.enumerated() where fd >= 0 && index >= start.file {
                _ = try await Self.copy(
                    fd, from: index == start.file ? start.offset : 0, limit: limit, into: writer, buffer: &buffer)
            }
            var offset = try await Self.copy(
                log.fd, from: start.file == older.count ? start.offset : 0, limit: limit, into: writer, buffer: &buffer)
            guard follow else { return }
            while true {
                let exited = try await supervisor.instance(id).state == .exited
                offset = try await Self.copy(log.fd, from: offset, limit: limit, into: writer, buffer: &buffer)
                if log.replaced() {
                    // Renamed to .1 by the relay, which writes only the new file from then on:
                    // the rest of the old one, then the new one from its start.
                    offset = try await Self.copy(log.fd, from: offset, limit: limit, into: writer, buffer: &buffer)
                    log.reopen()
                    offset = 0
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
            throw APIFailure.badRequest("tail '\(value.prefix(20))' is not a number of lines from 0 to 100000")
        }
        return lines
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
                let count = buffer.withUnsafeMutableBytes { pread(fds[index], $0.baseAddress, wanted, off_t(start)) }
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
    static func copy(_ fd: Int32, from offset: Int64, limit: Int64, into writer: StreamWriter, buffer: inout [UInt8])
        async throws -> Int64
    {
        guard fd >= 0 else { return offset }
        var position = offset
        while position < limit {
            let wanted = Int(min(Int64(buffer.count), limit - position))
            let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, wanted, off_t(position)) }
            guard count > 0 else { return position }
            try await writer.write(buffer[..<count])
            position += Int64(count)
        }
        return position
    }

    /// Every lifecycle event as one JSON line, until the client goes away.
    func events() -> Reply {
        let stream = supervisor.events()
        return .stream(contentType: "application/x-ndjson") { writer in
            let encoder = APICoding.encoder()
            for await event in stream {
                var line = try encoder.encode(event)
                line.append(0x0A)
                try await writer.write(line)
            }
        }
    }
}
