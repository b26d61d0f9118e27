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
        return try .json(
            try await supervisor.launch(id, arguments: body.arguments, caller: request.caller.uid, background: body.background),
            status: 201)
    }

    func listInstances(_ request: Request) async throws -> Reply {
        if let app = request.query["app"] { _ = try store.app(app) }
        return try .json(await supervisor.instances(app: request.query["app"], includeExited: request.flag("all")))
    }

    /// The instance's output from the start (the rotated part first); with `follow=1` new
    /// output as it is written, until the instance has exited and everything was sent.
    func logs(_ id: String, _ request: Request) async throws -> Reply {
        let files = try await supervisor.logFiles(id)
        let follow = request.flag("follow")
        let supervisor = supervisor
        return .stream(contentType: "text/plain; charset=utf-8") { writer in
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            for path in files.paths.dropLast() {
                try await Self.copy(path, from: 0, into: writer, buffer: &buffer)
            }
            guard let current = files.paths.last else { return }
            var offset = try await Self.copy(current, from: 0, into: writer, buffer: &buffer)
            guard follow else { return }
            while true {
                let exited = try await supervisor.instance(id).state == .exited
                // Truncated by rotation: what was before is in .log.1 now, read on from 0.
                var info = stat()
                if stat(current, &info) == 0, Int64(info.st_size) < offset { offset = 0 }
                offset = try await Self.copy(current, from: offset, into: writer, buffer: &buffer)
                if exited { return }
                try await Task.sleep(nanoseconds: 50_000_000)
            }
        }
    }

    /// Sends `path` from `offset` to its end; returns the new offset. A missing file is empty.
    static func copy(_ path: String, from offset: Int64, into writer: StreamWriter, buffer: inout [UInt8]) async throws -> Int64 {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return offset }
        defer { close(fd) }
        var position = offset
        while true {
            let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(position)) }
            guard count > 0 else { return position }
            try await writer.write(buffer[..<count])
            position += Int64(count)
        }
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
