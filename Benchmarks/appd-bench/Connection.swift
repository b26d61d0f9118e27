import Glibc

/// One keep-alive HTTP/1.1 connection to a Unix socket, blocking, used by one thread. No NIO
/// and no Foundation on the request path: the client should cost the machine (2 cores shared
/// with the daemon) as little as possible, and what it measures should be the daemon.
final class Connection {
    struct Response {
        var status: Int
        var body: ArraySlice<UInt8>
        /// Bytes on the wire, head included.
        var bytes: Int
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private let fd: Int32
    private var buffer: [UInt8] = []

    init(socket path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            throw Failure(description: "socket: \(String(cString: strerror(errno)))")
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(fd)
            throw Failure(description: "socket path too long: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            let error = errno
            close(fd)
            throw Failure(description: "connect \(path): \(String(cString: strerror(error)))")
        }
        buffer.reserveCapacity(1 << 16)
    }

    deinit { close(fd) }

    /// The request bytes for `method path` with an optional JSON body.
    static func request(_ method: String, _ path: String, body: String? = nil) -> [UInt8] {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: localhost\r\n"
        if let body {
            head +=
                "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        } else {
            head += "\r\n"
        }
        return Array(head.utf8)
    }

    /// Sends `request` and reads the whole response (Content-Length framing).
    func exchange(_ request: [UInt8]) throws -> Response {
        try send(request)
        return try receive()
    }

    private func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else {
                throw Failure(description: "write: \(String(cString: strerror(errno)))")
            }
            offset += written
        }
    }

    private func receive() throws -> Response {
        // Unread bytes of the previous response would be a framing error: there are none.
        buffer.removeAll(keepingCapacity: true)
        var headEnd: Int?
        var searched = 0
        while headEnd == nil {
            try fill()
            headEnd = Self.find(buffer, from: max(0, searched - 3))
            searched = buffer.count
        }
        guard let headEnd else { throw Failure(description: "no response head") }
        let head = String(decoding: buffer[..<headEnd], as: UTF8.self)
        let lines = head.split(separator: "\r\n")
        guard let statusLine = lines.first, statusLine.hasPrefix("HTTP/1.1 "),
            let status = Int(statusLine.dropFirst(9).prefix(3))
        else { throw Failure(description: "bad status line: \(lines.first ?? "")") }
        var length: Int?
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "content-length" {
                length = Int(parts[1].trimmingCharacters(in: " "))
            }
        }
        guard let length else {
            throw Failure(description: "response without Content-Length (status \(status))")
        }
        let bodyStart = headEnd + 4
        while buffer.count < bodyStart + length { try fill() }
        return Response(
            status: status, body: buffer[bodyStart..<(bodyStart + length)],
            bytes: bodyStart + length)
    }

    private func fill() throws {
        let chunk = 1 << 16
        let old = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: chunk))
        while true {
            let count = buffer[old...].withUnsafeMutableBytes { read(fd, $0.baseAddress, chunk) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                buffer.removeLast(chunk)
                throw Failure(
                    description: count == 0
                        ? "the daemon closed the connection"
                        : "read: \(String(cString: strerror(errno)))")
            }
            buffer.removeLast(chunk - count)
            return
        }
    }

    /// Index of "\r\n\r\n" at or after `from`.
    private static func find(_ bytes: [UInt8], from: Int) -> Int? {
        guard bytes.count >= 4 else { return nil }
        var index = from
        while index + 3 < bytes.count {
            if bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13
                && bytes[index + 3] == 10
            {
                return index
            }
            index += 1
        }
        return nil
    }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: String) -> Substring {
        var result = self
        while let first = result.first, set.contains(first) { result = result.dropFirst() }
        while let last = result.last, set.contains(last) { result = result.dropLast() }
        return result
    }
}

/// Monotonic nanoseconds.
func now() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}
