/// The body of an attached launch (`POST /v1/apps/{id}/launch?attach=1`, docs/api.md): a
/// sequence of frames, each a header line `KIND LENGTH\n` (KIND lowercase letters, LENGTH
/// decimal bytes) and then exactly LENGTH bytes of payload:
///
///     instance 312\n{"id":"…","app":"…",…}     the new instance (APIInstance JSON), first
///     output 6\nhello\n                          what the app wrote, as the relay logged it
///     exit 350\n{"id":"…","exit":{…},…}          the ended instance (APIInstance JSON), last
///     error 120\n{"error":{…}}                   appd could not follow to the end (APIErrorBody)
///
/// The app's output is only ever payload: whatever bytes it writes, they cannot end a frame
/// early or start one, so they cannot forge the instance or the exit status. A reader skips
/// kinds it does not know (later versions may add some).
public enum AttachFrame {
    public static let contentType = "application/vnd.appd.attach"

    /// The kinds this version writes.
    public static let instance = "instance"
    public static let output = "output"
    public static let exit = "exit"
    public static let error = "error"

    /// The largest payload the daemon writes in one frame (an output frame: one read of the
    /// log); a reader refuses frames larger than `maxPayload`.
    public static let maxOutputPayload = 64 * 1024
    public static let maxPayload = 1024 * 1024
    /// A header line: a kind of at most 16 letters, a space, at most 7 digits, a newline.
    public static let maxHeaderBytes = 25

    /// The header line of a frame with `count` bytes of payload.
    public static func header(_ kind: String, count: Int) -> [UInt8] {
        Array("\(kind) \(count)\n".utf8)
    }

    /// A whole frame (header and payload) in one buffer: one write, one HTTP chunk.
    public static func frame(_ kind: String, _ payload: some Collection<UInt8>) -> [UInt8] {
        var bytes = header(kind, count: payload.count)
        bytes.reserveCapacity(bytes.count + payload.count)
        bytes.append(contentsOf: payload)
        return bytes
    }
}

/// Why an attached launch's body cannot be read.
public struct AttachFrameError: Error, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Reads frames from the body as it arrives, in pieces of any size: `feed` hands each complete
/// frame to `onFrame` (output frames piece by piece, as their bytes come, so that output is
/// shown as soon as it arrives and never held whole). Bounded: a header line longer than
/// `AttachFrame.maxHeaderBytes`, a length over `AttachFrame.maxPayload`, a kind that is not
/// lowercase letters are errors; JSON payloads are collected up to that bound.
public struct AttachFrameParser {
    public enum Event {
        /// A whole frame whose payload is collected (instance, exit, error, unknown kinds).
        case frame(kind: String, payload: [UInt8])
        /// A piece of an output frame's payload.
        case output(UnsafeRawBufferPointer)
    }

    private enum State {
        case header
        case payload(kind: String, remaining: Int)
    }

    private var state = State.header
    private var header: [UInt8] = []
    private var collected: [UInt8] = []

    public init() {}

    /// Whether the body may end here: between frames, not inside one.
    public var atFrameBoundary: Bool {
        if case .header = state { return header.isEmpty }
        return false
    }

    public mutating func feed(
        _ bytes: UnsafeRawBufferPointer, onEvent: (Event) throws -> Void
    ) throws {
        var rest = bytes[...]
        while !rest.isEmpty {
            switch state {
            case .header:
                if let newline = rest.firstIndex(of: 0x0A) {
                    header.append(contentsOf: rest[rest.startIndex..<newline])
                    rest = rest[(newline + 1)...]
                    guard header.count < AttachFrame.maxHeaderBytes else {
                        throw AttachFrameError(
                            "a frame header is longer than \(AttachFrame.maxHeaderBytes) bytes")
                    }
                    let (kind, length) = try Self.parseHeader(header)
                    header.removeAll(keepingCapacity: true)
                    state = .payload(kind: kind, remaining: length)
                    if length == 0 { try finish(kind, onEvent) }
                } else {
                    header.append(contentsOf: rest)
                    rest = rest[rest.endIndex...]
                    guard header.count < AttachFrame.maxHeaderBytes else {
                        throw AttachFrameError(
                            "a frame header is longer than \(AttachFrame.maxHeaderBytes) bytes")
                    }
                }
            case .payload(let kind, let remaining):
                let take = min(remaining, rest.count)
                let piece = UnsafeRawBufferPointer(
                    rebasing: rest[rest.startIndex..<(rest.startIndex + take)])
                rest = rest[(rest.startIndex + take)...]
                if kind == AttachFrame.output {
                    try onEvent(.output(piece))
                } else {
                    collected.append(contentsOf: piece)
                }
                if remaining - take == 0 {
                    try finish(kind, onEvent)
                } else {
                    state = .payload(kind: kind, remaining: remaining - take)
                }
            }
        }
    }

    private mutating func finish(_ kind: String, _ onEvent: (Event) throws -> Void) throws {
        state = .header
        guard kind != AttachFrame.output else { return }
        let payload = collected
        collected = []
        try onEvent(.frame(kind: kind, payload: payload))
    }

    static func parseHeader(_ line: [UInt8]) throws -> (String, Int) {
        let printable = String(decoding: line.prefix(AttachFrame.maxHeaderBytes), as: UTF8.self)
            .unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : String($0) }
            .joined()
        guard let space = line.firstIndex(of: 0x20) else {
            throw AttachFrameError("the frame header '\(printable)' has no length")
        }
        let kind = line[..<space]
        let digits = line[(space + 1)...]
        guard (1...16).contains(kind.count), kind.allSatisfy({ (97...122).contains($0) }),
            (1...7).contains(digits.count), digits.allSatisfy({ (48...57).contains($0) }),
            let length = Int(String(decoding: digits, as: UTF8.self))
        else {
            throw AttachFrameError("the frame header '\(printable)' is not 'kind length'")
        }
        guard length <= AttachFrame.maxPayload else {
            throw AttachFrameError(
                "a frame of \(length) bytes is larger than the limit, \(AttachFrame.maxPayload)")
        }
        return (String(decoding: kind, as: UTF8.self), length)
    }
}
