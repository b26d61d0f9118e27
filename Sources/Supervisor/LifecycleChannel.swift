import AppBundle
import AppdBase
import Dispatch
import Foundation
import Glibc
import LifecycleProtocol
import Synchronization

/// A message from the app on its lifecycle channel (docs/lifecycle.md, "App → daemon"); the
/// types and field names are LifecycleProtocol's, which AppRuntime sends with.
enum AppMessage: Sendable, Equatable {
    case hello(version: Int)
    case ready
    /// `seconds`: the time the app asks for (nil: `BackgroundTaskTime`).
    case beginBackgroundTask(name: String, ref: Int?, seconds: Double?)
    case endBackgroundTask(task: Int)
    /// Background fetches at most every `seconds` (nil: "never").
    case setFetchInterval(seconds: Double?)
    /// The answer to performFetch number `fetch`.
    case fetchCompleted(fetch: Int, result: FetchResult)
    /// A type this daemon does not know: ignored, for forward compatibility.
    case unknown(type: String)
    /// Not JSON, no `type`, or over 64 KiB: the channel is closed and the app is a plain
    /// program from then on.
    case protocolError(String)
    /// The app closed its end (or is gone).
    case closed

    var name: String {
        switch self {
        case .hello: AppMessageType.hello.rawValue
        case .ready: AppMessageType.ready.rawValue
        case .beginBackgroundTask: AppMessageType.beginBackgroundTask.rawValue
        case .endBackgroundTask: AppMessageType.endBackgroundTask.rawValue
        case .setFetchInterval: AppMessageType.setMinimumBackgroundFetchInterval.rawValue
        case .fetchCompleted: AppMessageType.fetchCompleted.rawValue
        case .unknown(let type): type
        case .protocolError: "protocol error"
        case .closed: "closed"
        }
    }

    /// Largest `task`/`ref`/`version` accepted: what a Double carries exactly, so the app's
    /// own number comes back to it unchanged in the daemon's JSON.
    static let maxInteger = 1 << 53

    /// Parses one datagram; total over any bytes (LifecycleParserTests). Unknown fields are
    /// ignored; a known type with a field of the wrong type or out of range is a protocol
    /// error, so a broken runtime is noticed, not half-obeyed.
    static func parse(_ bytes: [UInt8]) -> AppMessage {
        let object: [String: LifecycleJSON.Value]
        switch LifecycleJSON.object(bytes) {
        case .success(let fields): object = fields
        case .failure(let failure): return .protocolError("not a message: \(failure.message)")
        }
        guard case .string(let type)? = object[LifecycleField.type.rawValue] else {
            return .protocolError("a message without a \"type\" string")
        }
        func field(_ key: LifecycleField) -> LifecycleJSON.Value? { object[key.rawValue] }
        /// nil: absent (or null); a protocol error: present but not an integer in range.
        func integer(_ key: LifecycleField, in range: ClosedRange<Int>) -> Result<Int?, Failure> {
            switch field(key) {
            case nil, .null?: return .success(nil)
            case .number(let literal, let value)?:
                // Digits alone are read as written (a Double would round 2^53 + 1 into range);
                // a fraction or exponent must still make a whole number.
                let plain = literal.utf8.allSatisfy {
                    $0 == UInt8(ascii: "-") || (48...57).contains($0)
                }
                guard let exact = plain ? Int(literal) : Int(exactly: value), range.contains(exact)
                else {
                    return .failure(
                        Failure(
                            "\(type): \"\(key.rawValue)\" is \(literal), not a whole number in \(range.lowerBound)...\(range.upperBound)"
                        ))
                }
                return .success(exact)
            default: return .failure(Failure("\(type): \"\(key.rawValue)\" is not a number"))
            }
        }
        guard let known = AppMessageType(rawValue: type) else {
            return .unknown(type: String(type.prefix(100)))
        }
        switch known {
        case .hello:
            switch integer(.version, in: 1...maxInteger) {
            case .success(let version): return .hello(version: version ?? 1)
            case .failure(let failure): return .protocolError(failure.message)
            }
        case .ready:
            return .ready
        case .beginBackgroundTask:
            var name = ""
            switch field(.name) {
            case nil, .null?: break
            case .string(let text)?: name = String(text.prefix(200))
            default: return .protocolError("beginBackgroundTask: \"name\" is not a string")
            }
            let ref: Int?
            switch integer(.ref, in: -maxInteger...maxInteger) {
            case .success(let value): ref = value
            case .failure(let failure): return .protocolError(failure.message)
            }
            var seconds: Double?
            switch field(.seconds) {
            case nil, .null?: break
            case .number(let literal, let value)?:
                // Finite (the reader refuses others); negative makes no sense.
                guard value >= 0 else {
                    return .protocolError("beginBackgroundTask: \"seconds\" is \(literal), not ≥ 0")
                }
                seconds = value
            default: return .protocolError("beginBackgroundTask: \"seconds\" is not a number")
            }
            return .beginBackgroundTask(name: name, ref: ref, seconds: seconds)
        case .endBackgroundTask:
            switch integer(.task, in: 0...maxInteger) {
            case .success(let task?): return .endBackgroundTask(task: task)
            case .success(nil): return .protocolError("endBackgroundTask without a \"task\" number")
            case .failure(let failure): return .protocolError(failure.message)
            }
        case .setMinimumBackgroundFetchInterval:
            switch field(.interval) {
            case .string(LifecycleWire.fetchIntervalNever)?: return .setFetchInterval(seconds: nil)
            case .number(let literal, let value)?:
                // Finite (the reader refuses others); the daemon bounds it from below.
                guard value >= 0 else {
                    return .protocolError("\(type): \"interval\" is \(literal), not ≥ 0")
                }
                return .setFetchInterval(seconds: value)
            default:
                return .protocolError(
                    "\(type): \"interval\" is neither a number of seconds nor \"\(LifecycleWire.fetchIntervalNever)\""
                )
            }
        case .fetchCompleted:
            let fetch: Int
            switch integer(.fetch, in: 1...maxInteger) {
            case .success(let number?): fetch = number
            case .success(nil): return .protocolError("fetchCompleted without a \"fetch\" number")
            case .failure(let failure): return .protocolError(failure.message)
            }
            guard case .string(let text)? = field(.result), let result = FetchResult(rawValue: text)
            else {
                return .protocolError(
                    "fetchCompleted: \"result\" is not one of "
                        + FetchResult.allCases.map(\.rawValue).joined(separator: ", "))
            }
            return .fetchCompleted(fetch: fetch, result: result)
        }
    }

    struct Failure: Error {
        var message: String
        init(_ message: String) { self.message = message }
    }
}

/// The daemon's end of one instance's lifecycle channel: a `SOCK_SEQPACKET` socket pair, one
/// JSON object per datagram. What the app sends arrives, in order, on `messages`; `send` never
/// blocks (a full buffer drops the message: an app that does not read its channel only loses
/// its own events).
///
/// Everything the app sends is bounded: a datagram by `maxMessageBytes`, the rate by a token
/// bucket (`messagesPerSecond`, bursts of `burst`; past it messages are dropped, and `burst`
/// drops in a row close the channel as a protocol error), the messages waiting for the
/// supervisor by `bufferedMessages` (more is a protocol error too). Messages of unknown types
/// count against the rate and are then forgotten: never buffered, never published.
final class LifecycleChannel: @unchecked Sendable {
    static let maxMessageBytes = LifecycleWire.maxMessageBytes
    static let messagesPerSecond = 100.0
    static let burst = 200
    static let bufferedMessages = 256
    /// Datagrams read per wakeup of the shared queue, so one busy channel does not hold up
    /// the others.
    static let messagesPerWakeup = 64

    /// Known messages only; the stream ends when the channel does (then see `ending`).
    let messages: AsyncStream<AppMessage>
    private let continuation: AsyncStream<AppMessage>.Continuation
    private let source: DispatchSourceRead
    /// The fd, or -1 once closed: sends and the close take the lock, so a send never writes to
    /// a number the kernel has handed out again.
    private let fd: Descriptor
    private let end = Ending()

    /// Why reading stopped; the first reason wins.
    private final class Ending: Sendable {
        let value = Mutex<AppMessage?>(nil)
    }

    private final class Descriptor: Sendable {
        let value: Mutex<Int32>
        init(_ fd: Int32) { value = Mutex(fd) }
    }

    /// What the read handler owns (it runs on one serial queue): the receive buffer, and the
    /// token bucket.
    private final class Reader: @unchecked Sendable {
        // One byte more than the limit, and MSG_TRUNC for the real length: longer is an error.
        // Held only while a wakeup reads (`withBuffer`): 1,000 idle channels kept 64 MB of
        // zeroed buffers resident.
        private var storage: UnsafeMutableRawBufferPointer?
        var tokens = Double(LifecycleChannel.burst)
        var refilledAt = DispatchTime.now().uptimeNanoseconds
        var dropped = 0

        /// Runs `body` with the receive buffer, made for this wakeup (uninitialized: recv
        /// writes what is read, and only that is read) and freed by `release` after it.
        func withBuffer<T>(_ body: (UnsafeMutableRawBufferPointer) -> T) -> T {
            let buffer =
                storage ?? .allocate(byteCount: LifecycleChannel.maxMessageBytes + 1, alignment: 1)
            storage = buffer
            return body(buffer)
        }

        func release() {
            storage?.deallocate()
            storage = nil
        }

        deinit { release() }

        /// Takes a token if there is one.
        func admit() -> Bool {
            let now = DispatchTime.now().uptimeNanoseconds
            let elapsed = Double(now &- refilledAt) / 1e9
            refilledAt = now
            tokens = min(
                Double(LifecycleChannel.burst),
                tokens + elapsed * LifecycleChannel.messagesPerSecond)
            guard tokens >= 1 else { return false }
            tokens -= 1
            return true
        }
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
        (messages, continuation) = AsyncStream<AppMessage>.makeStream(
            bufferingPolicy: .bufferingOldest(Self.bufferedMessages))
        source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        let continuation = continuation
        let fd = fd
        let reader = Reader()
        source.setEventHandler { [source, end] in
            /// Records why reading stopped (the first reason wins) and stops.
            func finish(_ reason: AppMessage) {
                end.value.withLock { if $0 == nil { $0 = reason } }
                source.cancel()
                continuation.finish()
            }
            defer { reader.release() }
            for _ in 0..<Self.messagesPerWakeup {
                let count = reader.withBuffer {
                    recv(
                        descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT) | Int32(MSG_TRUNC)
                    )
                }
                if count < 0 {
                    if errno == EINTR { continue }
                    if errno == EAGAIN { return }
                    return finish(.closed)
                }
                if count == 0 { return finish(.closed) }
                guard reader.admit() else {
                    reader.dropped += 1
                    if reader.dropped >= Self.burst {
                        return finish(
                            .protocolError(
                                "more than \(Int(Self.messagesPerSecond)) messages a second (\(reader.dropped) dropped in a row)"
                            ))
                    }
                    continue
                }
                reader.dropped = 0
                if count > Self.maxMessageBytes {
                    return finish(
                        .protocolError(
                            "a message of \(count) bytes (at most \(Self.maxMessageBytes))"))
                }
                let message = AppMessage.parse(reader.withBuffer { Array($0.prefix(count)) })
                switch message {
                case .protocolError: return finish(message)
                case .unknown: continue
                default:
                    if case .dropped = continuation.yield(message) {
                        return finish(
                            .protocolError(
                                "\(Self.bufferedMessages) messages waiting to be handled"))
                    }
                }
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

    /// Why the channel ended once `messages` has: `.closed` (the app closed it, or the daemon
    /// did) or `.protocolError`.
    var ending: AppMessage { end.value.withLock { $0 } ?? .closed }

    /// Sends one message; false if it could not (closed, or the app's buffer is full).
    @discardableResult
    func send(_ message: [String: Any]) -> Bool {
        guard let data = Self.encode(message) else { return false }
        return fd.value.withLock { value in
            guard value >= 0 else { return false }
            let sent = data.withUnsafeBytes {
                Glibc.send(
                    value, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL))
            }
            return sent == data.count
        }
    }

    /// One message as the datagram `send` writes; nil when it is not JSON.
    static func encode(_ message: [String: Any]) -> Data? {
        try? JSONSerialization.data(
            withJSONObject: message, options: [.sortedKeys, .withoutEscapingSlashes])
    }

    /// Stops reading and closes the daemon's end: the app reads EOF.
    func close() { source.cancel() }
}

/// A message to the app in the shared vocabulary (LifecycleProtocol): its type and fields by
/// name, never as free strings; `json` is what `LifecycleChannel.send` writes.
struct DaemonMessage {
    var type: DaemonMessageType
    var fields: [LifecycleField: Any]

    init(_ type: DaemonMessageType, _ fields: [LifecycleField: Any] = [:]) {
        self.type = type
        self.fields = fields
    }

    var json: [String: Any] {
        var object: [String: Any] = [LifecycleField.type.rawValue: type.rawValue]
        for (field, value) in fields { object[field.rawValue] = value }
        return object
    }
}
