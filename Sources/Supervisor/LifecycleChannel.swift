import AppBundle
import Dispatch
import Foundation
import Glibc
import Synchronization

/// A message from the app on its lifecycle channel (docs/lifecycle.md, "App → daemon").
enum AppMessage: Sendable, Equatable {
    case hello(version: Int)
    case ready
    /// `seconds`: the time the app asks for (nil: `BackgroundTaskTime`).
    case beginBackgroundTask(name: String, ref: Int?, seconds: Double?)
    case endBackgroundTask(task: Int)
    /// A type this daemon does not know: ignored, for forward compatibility.
    case unknown(type: String)
    /// Not JSON, no `type`, or over 64 KiB: the channel is closed and the app is a plain
    /// program from then on.
    case protocolError(String)
    /// The app closed its end (or is gone).
    case closed

    var name: String {
        switch self {
        case .hello: "hello"
        case .ready: "ready"
        case .beginBackgroundTask: "beginBackgroundTask"
        case .endBackgroundTask: "endBackgroundTask"
        case .unknown(let type): type
        case .protocolError: "protocol error"
        case .closed: "closed"
        }
    }

    /// Parses one datagram. Unknown fields are ignored; a known type with a field of the
    /// wrong type is a protocol error, so a broken runtime is noticed, not half-obeyed.
    static func parse(_ bytes: [UInt8]) -> AppMessage {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
            return .protocolError("not a JSON object: \(String(decoding: bytes.prefix(80), as: UTF8.self))")
        }
        guard let type = object["type"] as? String else { return .protocolError("a message without a \"type\" string") }
        func number(_ key: String) -> Double? { (object[key] as? NSNumber).map(\.doubleValue) }
        switch type {
        case "hello":
            return .hello(version: number("version").map { Int($0) } ?? 1)
        case "ready":
            return .ready
        case "beginBackgroundTask":
            if object["name"] != nil && !(object["name"] is String) { return .protocolError("beginBackgroundTask: \"name\" is not a string") }
            return .beginBackgroundTask(
                name: String((object["name"] as? String ?? "").prefix(200)), ref: number("ref").map { Int($0) },
                seconds: number("seconds"))
        case "endBackgroundTask":
            guard let task = number("task") else { return .protocolError("endBackgroundTask without a \"task\" number") }
            return .endBackgroundTask(task: Int(task))
        default:
            return .unknown(type: String(type.prefix(100)))
        }
    }
}

/// The daemon's end of one instance's lifecycle channel: a `SOCK_SEQPACKET` socket pair, one
/// JSON object per datagram. What the app sends arrives, in order, on `messages`; `send` never
/// blocks (a full buffer drops the message: an app that does not read its channel only loses
/// its own events).
final class LifecycleChannel: @unchecked Sendable {
    static let maxMessageBytes = 64 << 10

    let messages: AsyncStream<AppMessage>
    private let continuation: AsyncStream<AppMessage>.Continuation
    private let source: DispatchSourceRead
    /// The fd, or -1 once closed: sends and the close take the lock, so a send never writes to
    /// a number the kernel has handed out again.
    private let fd: Descriptor

    private final class Descriptor: Sendable {
        let value: Mutex<Int32>
        init(_ fd: Int32) { value = Mutex(fd) }
    }

    /// A connected pair: the daemon's end (non-blocking) and the app's (blocking, for fd 3),
    /// both close-on-exec.
    static func pair() throws -> (daemon: Int32, app: Int32) {
        var fds: [Int32] = [-1, -1]
        let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &fds) == 0 else {
            throw AppdError.system("socketpair for the lifecycle channel")
        }
        let flags = fcntl(fds[0], F_GETFL)
        _ = fcntl(fds[0], F_SETFL, flags | O_NONBLOCK)
        return (fds[0], fds[1])
    }

    init(fd descriptor: Int32, queue: DispatchQueue) {
        fd = Descriptor(descriptor)
        (messages, continuation) = AsyncStream<AppMessage>.makeStream()
        source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        let continuation = continuation
        let fd = fd
        source.setEventHandler { [source] in
            // One byte more than the limit, and MSG_TRUNC for the real length: longer is an error.
            var buffer = [UInt8](repeating: 0, count: Self.maxMessageBytes + 1)
            while true {
                let count = buffer.withUnsafeMutableBytes {
                    recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT) | Int32(MSG_TRUNC))
                }
                if count < 0 {
                    if errno == EINTR { continue }
                    if errno == EAGAIN { return }
                    continuation.yield(.closed)
                } else if count == 0 {
                    continuation.yield(.closed)
                } else if count > Self.maxMessageBytes {
                    continuation.yield(.protocolError("a message of \(count) bytes (at most \(Self.maxMessageBytes))"))
                } else {
                    let message = AppMessage.parse(Array(buffer[..<count]))
                    continuation.yield(message)
                    if case .protocolError = message {} else { continue }
                }
                // Closed or broken: no more reading; the supervisor closes it.
                source.cancel()
                continuation.finish()
                return
            }
        }
        source.setCancelHandler {
            fd.value.withLock { value in
                if value >= 0 { Glibc.close(value) }
                value = -1
            }
            continuation.finish()
        }
        source.resume()
    }

    /// Sends one message; false if it could not (closed, or the app's buffer is full).
    @discardableResult
    func send(_ message: [String: Any]) -> Bool {
        guard let data = try? JSONSerialization.data(withJSONObject: message, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return false }
        return fd.value.withLock { value in
            guard value >= 0 else { return false }
            let sent = data.withUnsafeBytes { Glibc.send(value, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL)) }
            return sent == data.count
        }
    }

    /// Stops reading and closes the daemon's end: the app reads EOF.
    func close() { source.cancel() }
}
