import Foundation
import Testing

/// A Unix-socket server on a thread of its own that answers each connection with whatever the
/// test's handler writes: canned bytes, not an HTTP implementation, so a test can send exactly
/// the framing (or the breakage) it is about.
final class CannedServer: @unchecked Sendable {
    typealias Handler = @Sendable (ServerConnection) throws -> Void

    let directory: Scratch
    let socketPath: String
    private let listener: Int32
    private let done = DispatchSemaphore(value: 0)
    /// Every request head read, in order (bodies as the handler read them).
    let requests = Locked<[ReceivedRequest]>([])

    init(_ handler: @escaping Handler) throws {
        directory = Scratch("appd-client")
        socketPath = directory.sub("appd.sock")
        listener = try listeningSocket(at: socketPath)
        let thread = Thread { [listener, requests, done] in
            while true {
                let fd = accept(listener, nil, nil)
                if fd < 0 {
                    if errno == EINTR { continue }
                    break
                }
                let connection = ServerConnection(fd: fd)
                if let head = connection.readHead() {
                    connection.request = head
                    try? handler(connection)
                    requests.withLock { $0.append(connection.request ?? head) }
                }
                connection.close()
            }
            done.signal()
        }
        thread.start()
    }

    /// Stops accepting and waits for the thread, so no handler outlives its test.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        done.wait()
        close(listener)
    }

    /// Stops the server and returns what it received: after this no handler is still running.
    func finish() -> [ReceivedRequest] {
        stop()
        return requests.withLock { $0 }
    }
}

/// A request as the server read it.
struct ReceivedRequest: Sendable {
    var line: String
    var headers: [String: String]
    var body = Data()
    /// False when a chunked body ended without its last chunk.
    var complete = true

    func header(_ name: String) -> String? { headers[name.lowercased()] }
}

final class ServerConnection: @unchecked Sendable {
    let fd: Int32
    private var buffer: [UInt8] = []
    var request: ReceivedRequest?

    init(fd: Int32) { self.fd = fd }

    func close() { Glibc.close(fd) }

    func write(_ text: String) { write(Array(text.utf8)) }

    func write(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent <= 0 { return }
            offset += sent
        }
    }

    /// A complete answer with a Content-Length.
    func respond(_ status: String, _ body: String, type: String = "application/json") {
        write(
            "HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
        )
    }

    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return false }
        buffer += chunk[..<count]
        return true
    }

    private func line() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let text = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeFirst(newline + 1)
                return text.hasSuffix("\r") ? String(text.dropLast()) : text
            }
            guard fill() else { return nil }
        }
    }

    fileprivate func readHead() -> ReceivedRequest? {
        guard let requestLine = line() else { return nil }
        var headers: [String: String] = [:]
        while let header = line(), !header.isEmpty {
            guard let colon = header.firstIndex(of: ":") else { continue }
            headers[header[..<colon].lowercased()] = header[header.index(after: colon)...]
                .trimmingCharacters(in: .whitespaces)
        }
        return ReceivedRequest(line: requestLine, headers: headers)
    }

    private func take(_ count: Int) -> [UInt8]? {
        while buffer.count < count {
            guard fill() else { return nil }
        }
        defer { buffer.removeFirst(count) }
        return Array(buffer[..<count])
    }

    /// Reads the body the head announces (Content-Length or chunked) into `request`.
    @discardableResult
    func readBody() -> Data {
        guard var request else { return Data() }
        defer { self.request = request }
        if request.header("Transfer-Encoding") == "chunked" {
            while true {
                guard let sizeLine = line(), let size = Int(sizeLine, radix: 16) else {
                    request.complete = false
                    return request.body
                }
                if size == 0 {
                    _ = line()
                    return request.body
                }
                guard let data = take(size), take(2) == [0x0D, 0x0A] else {
                    request.complete = false
                    return request.body
                }
                request.body.append(contentsOf: data)
            }
        }
        if let length = request.header("Content-Length").flatMap(Int.init), let data = take(length)
        {
            request.body = Data(data)
        }
        return request.body
    }
}

private func listeningSocket(at path: String) throws -> Int32 {
    let fd = try boundSocket(at: path)
    guard listen(fd, 16) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    return fd
}

/// A Unix stream socket bound to `path` (the socket file exists from here on).
func boundSocket(at path: String) throws -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: Array(path.utf8) + [0])
    }
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    guard fd >= 0, bound == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    return fd
}

/// A scratch directory removed when the value goes away, even if the test failed.
final class Scratch: Sendable {
    let path: String

    init(_ label: String) {
        // Short: a socket path must fit in 108 bytes.
        var template = Array("/tmp/\(label).XXXXXX".utf8)
        template.append(0)
        let made = template.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress.flatMap {
                $0.withMemoryRebound(to: CChar.self, capacity: buffer.count) { mkdtemp($0) }
            }
        }
        precondition(made != nil, "mkdtemp failed")
        path = String(decoding: template.dropLast(), as: UTF8.self)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func sub(_ name: String) -> String { "\(path)/\(name)" }
}

/// A value shared between threads in tests.
final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
