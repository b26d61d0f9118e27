import Foundation
import Glibc

struct WireError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A blocking client connection to a Unix socket, written against the kernel rather than an
/// HTTP library so a test can send anything. Writes never raise SIGPIPE (the daemon may close
/// first), and every read waits at most until a deadline.
final class Wire {
    let fd: Int32
    /// Bytes received and not yet taken as a response.
    private(set) var pending: [UInt8] = []
    private(set) var closedByPeer = false

    init(_ path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw WireError("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(fd)
            throw WireError("socket path too long: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            let error = errno
            close(fd)
            throw WireError("connect \(path): \(String(cString: strerror(error)))")
        }
        // A daemon that stops reading must not hang the test in send().
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// Writes all of `bytes`; false if the daemon closed the connection (or stalled) first.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += sent
        }
        return true
    }

    func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// Waits for more bytes until `deadline`; false when the peer closed (or reset) or time ran out.
    private func fill(until deadline: Date) -> Bool {
        guard !closedByPeer else { return false }
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return false }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&entry, 1, Int32(min(left * 1000, 60_000)) + 1)
            if ready < 0 && errno == EINTR { continue }
            if ready == 0 { continue }
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            let count = recv(fd, &buffer, buffer.count, 0)
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard count > 0 else {
                closedByPeer = true
                return false
            }
            pending += buffer[..<count]
            return true
        }
    }

    /// Everything that arrives until the daemon closes or `timeout` seconds pass.
    func readToEnd(timeout: Double) -> (bytes: [UInt8], closed: Bool) {
        let deadline = Date(timeIntervalSinceNow: timeout)
        while fill(until: deadline) {}
        defer { pending = [] }
        return (pending, closedByPeer)
    }

    /// The next whole response; nil if the daemon closed without (the rest of) one.
    func readResponse(timeout: Double) throws -> HTTPResponse? {
        let deadline = Date(timeIntervalSinceNow: timeout)
        while true {
            if let (response, used) = try HTTPResponse.parse(pending[...], atEnd: closedByPeer) {
                pending.removeFirst(used)
                return response
            }
            guard fill(until: deadline) else {
                if closedByPeer { return nil }
                throw WireError("no whole response within \(timeout) s; got \(pending.count) bytes")
            }
        }
    }
}

/// One response as it came off the wire.
struct HTTPResponse {
    var status: Int
    /// Header names in lower case.
    var headers: [String: String]
    var body: Data

    /// appd's own answers carry `Server: appd`; NIO's 400 for unparsable input does not.
    var fromAppd: Bool { headers["server"] == "appd" }

    var json: Any? { try? JSONSerialization.jsonObject(with: body) }

    /// `code` of an `{"error": {"code", "message", ...}}` body.
    var errorCode: String? {
        guard let object = json as? [String: Any], let error = object["error"] as? [String: Any],
            error["message"] is String
        else { return nil }
        return error["code"] as? String
    }

    /// A response at the start of `bytes` and the bytes it took; nil while incomplete. The
    /// answer to a HEAD request (`bodiless`) has a Content-Length but no body.
    static func parse(_ bytes: ArraySlice<UInt8>, atEnd: Bool, bodiless: Bool = false) throws
        -> (HTTPResponse, Int)?
    {
        guard let headEnd = find([13, 10, 13, 10], in: bytes) else {
            if atEnd && !bytes.isEmpty {
                throw WireError("a partial response head: \(show(bytes))")
            }
            return nil
        }
        let lines = String(decoding: bytes[bytes.startIndex..<headEnd], as: UTF8.self)
            .components(separatedBy: "\r\n")
        let statusLine = lines[0].split(separator: " ", maxSplits: 2)
        guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."),
            let status = Int(statusLine[1])
        else { throw WireError("not a status line: \(lines[0].prefix(200))") }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else {
                throw WireError("bad header line: \(line)")
            }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...]
                .trimmingCharacters(in: .whitespaces)
        }
        let bodyStart = headEnd + 4
        var response = HTTPResponse(status: status, headers: headers, body: Data())
        if bodiless { return (response, bodyStart - bytes.startIndex) }
        if headers["transfer-encoding"]?.lowercased() == "chunked" {
            var position = bodyStart
            while true {
                guard let lineEnd = find([13, 10], in: bytes[position...]) else { return nil }
                let sizeText = String(decoding: bytes[position..<lineEnd], as: UTF8.self)
                guard let size = Int(sizeText.split(separator: ";").first ?? "", radix: 16) else {
                    throw WireError("bad chunk size '\(sizeText.prefix(40))'")
                }
                position = lineEnd + 2
                guard bytes.endIndex - position >= size + 2 else { return nil }
                if size == 0 { return (response, position + 2 - bytes.startIndex) }
                response.body.append(contentsOf: bytes[position..<(position + size)])
                position += size + 2
            }
        }
        if let lengthText = headers["content-length"] {
            guard let length = Int(lengthText) else {
                throw WireError("bad Content-Length \(lengthText)")
            }
            guard bytes.endIndex - bodyStart >= length else { return nil }
            response.body = Data(bytes[bodyStart..<(bodyStart + length)])
            return (response, bodyStart + length - bytes.startIndex)
        }
        // Neither length nor chunks: the body runs to the close.
        guard atEnd else { return nil }
        response.body = Data(bytes[bodyStart...])
        return (response, bytes.count)
    }

    /// Every response in `bytes`, which must hold nothing else.
    static func parseAll(_ bytes: [UInt8], bodiless: Bool = false) throws -> [HTTPResponse] {
        var responses: [HTTPResponse] = []
        var rest = bytes[...]
        while !rest.isEmpty {
            guard let (response, used) = try parse(rest, atEnd: true, bodiless: bodiless) else {
                throw WireError("a response cut short: \(show(rest))")
            }
            responses.append(response)
            rest = rest.dropFirst(used)
        }
        return responses
    }

    static func show(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes.prefix(300), as: UTF8.self).debugDescription
    }
}

func find(_ needle: [UInt8], in bytes: ArraySlice<UInt8>) -> Int? {
    guard bytes.count >= needle.count else { return nil }
    var index = bytes.startIndex
    while index <= bytes.endIndex - needle.count {
        if bytes[index] == needle[0] && bytes[index..<(index + needle.count)].elementsEqual(needle)
        {
            return index
        }
        index += 1
    }
    return nil
}
