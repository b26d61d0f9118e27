#if canImport(Glibc)
    import Glibc
#endif

/// Reads one HTTP/1.1 answer from a connection: the head within fixed limits, then the body as
/// it arrives, whichever way it is framed (Content-Length, chunked, or until the close).
final class HTTPResponseReader {
    /// Status line and headers together; the daemon's are a few hundred bytes.
    static let maxHeadBytes = 64 * 1024
    static let maxHeaderCount = 100
    /// A chunk-size line or a trailer line.
    static let maxLineBytes = 8 * 1024

    private let read: (UnsafeMutableRawBufferPointer) throws -> Int
    /// Bytes `start..<end` of `storage` are read and not yet consumed.
    private var storage = [UInt8](repeating: 0, count: 16 * 1024)
    private var start = 0
    private var end = 0
    private var atEnd = false
    private(set) var receivedAnything = false

    /// `read` fills the buffer it is given and returns the count, 0 at the end of the stream;
    /// a `TransportError` it throws becomes `ResponseFailure.transport`.
    init(read: @escaping (UnsafeMutableRawBufferPointer) throws -> Int) {
        self.read = read
    }

    private var available: Int { end - start }

    /// Reads more; false at the end of the stream. Grows the buffer only when it is full of
    /// unconsumed bytes (a long line: the callers bound those).
    private func fill() throws -> Bool {
        guard !atEnd else { return false }
        if start == end {
            start = 0
            end = 0
        } else if end == storage.count {
            if start > 0 {
                let (first, count) = (start, end - start)
                storage.withUnsafeMutableBytes { raw in
                    guard let base = raw.baseAddress else { return }
                    _ = memmove(base, base + first, count)
                }
                end -= start
                start = 0
            } else {
                storage.append(contentsOf: repeatElement(0, count: storage.count))
            }
        }
        let count: Int
        do {
            count = try storage.withUnsafeMutableBytes { raw in
                try read(UnsafeMutableRawBufferPointer(rebasing: raw[end...]))
            }
        } catch let error as TransportError {
            throw ResponseFailure.transport(error)
        }
        end += count
        if count == 0 { atEnd = true }
        if count > 0 { receivedAnything = true }
        return count > 0
    }

    /// One line without its CRLF (a bare LF is accepted too), at most `limit` bytes.
    private func line(limit: Int, what: String) throws -> ArraySlice<UInt8> {
        // Counted from `start`: a fill may move the bytes to the front of the buffer.
        var scanned = 0
        while true {
            if let newline = storage[(start + scanned)..<end].firstIndex(of: 0x0A) {
                var last = newline
                if last > start && storage[last - 1] == 0x0D { last -= 1 }
                let line = storage[start..<last]
                start = newline + 1
                return line
            }
            scanned = available
            guard available <= limit else {
                throw ResponseFailure.tooLarge("\(what) is longer than \(limit) bytes")
            }
            guard try fill() else {
                if !receivedAnything { throw ResponseFailure.noAnswer }
                throw ResponseFailure.truncated("the connection closed in the middle of \(what)")
            }
        }
    }

    /// The CRLF (or LF) that ends a chunk's data.
    private func chunkEnd() throws {
        while available < 2, !(available == 1 && storage[start] == 0x0A) {
            guard try fill() else {
                throw ResponseFailure.truncated("the connection closed at the end of a chunk")
            }
        }
        if storage[start] == 0x0A {
            start += 1
        } else if storage[start] == 0x0D && storage[start + 1] == 0x0A {
            start += 2
        } else {
            throw ResponseFailure.malformed("a chunk is longer than its size line says")
        }
    }

    /// The head of the final answer; interim 1xx answers are read and dropped.
    func head() throws -> HTTPResponseHead {
        while true {
            let head = try oneHead()
            if head.status >= 200 || head.status == 101 { return head }
        }
    }

    private func oneHead() throws -> HTTPResponseHead {
        var budget = Self.maxHeadBytes
        func next(_ what: String) throws -> String {
            let bytes = try line(limit: budget, what: what)
            budget -= bytes.count + 2
            guard budget >= 0 else {
                throw ResponseFailure.tooLarge(
                    "the header is longer than \(Self.maxHeadBytes) bytes")
            }
            guard !bytes.contains(where: { $0 == 0 || $0 == 0x0D }) else {
                throw ResponseFailure.malformed("\(what) holds a NUL or a bare CR")
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        let statusLine = try next("the status line")
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].count == 3,
            let status = Int(parts[1]), (100...599).contains(status)
        else {
            throw ResponseFailure.malformed(
                "the status line '\(Self.printable(statusLine))' is not HTTP/1.x")
        }
        var head = HTTPResponseHead(
            status: status, reason: parts.count > 2 ? String(parts[2]) : "", headers: [])
        while true {
            let text = try next("a header")
            if text.isEmpty { return head }
            guard head.headers.count < Self.maxHeaderCount else {
                throw ResponseFailure.tooLarge("more than \(Self.maxHeaderCount) headers")
            }
            guard let colon = text.firstIndex(of: ":"), colon > text.startIndex,
                !text[..<colon].contains(where: { $0 == " " || $0 == "\t" })
            else {
                throw ResponseFailure.malformed(
                    "the header line '\(Self.printable(text))' has no name")
            }
            let value = text[text.index(after: colon)...].trimmingBlanks()
            head.headers.append((String(text[..<colon]), value))
        }
    }

    /// Hands the body to `deliver` as it arrives; errors of `deliver` pass through untouched.
    func body(_ framing: Framing, deliver: (UnsafeRawBufferPointer) throws -> Void) throws {
        switch framing {
        case .none: return
        case .length(let length): try pass(length, of: "the body", deliver: deliver)
        case .untilClose:
            while true {
                if available == 0, !(try fill()) { return }
                try hand(available, to: deliver)
            }
        case .chunked:
            while true {
                let size = try chunkSize()
                if size == 0 { return try trailers() }
                try pass(size, of: "a chunk", deliver: deliver)
                try chunkEnd()
            }
        }
    }

    private func pass(
        _ count: Int, of what: String, deliver: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        var remaining = count
        while remaining > 0 {
            if available == 0, !(try fill()) {
                throw ResponseFailure.truncated(
                    "the connection closed \(remaining) bytes before the end of \(what)")
            }
            let take = min(remaining, available)
            try hand(take, to: deliver)
            remaining -= take
        }
    }

    private func hand(_ count: Int, to deliver: (UnsafeRawBufferPointer) throws -> Void) throws {
        let first = start
        start += count
        try storage.withUnsafeBytes {
            try deliver(UnsafeRawBufferPointer(rebasing: $0[first..<first + count]))
        }
    }

    private func chunkSize() throws -> Int {
        let line = try line(limit: Self.maxLineBytes, what: "a chunk-size line")
        // Extensions after ';' carry nothing the client needs.
        let digits = line.prefix { $0 != UInt8(ascii: ";") }.filter { $0 != 0x20 && $0 != 0x09 }
        let isHex: (UInt8) -> Bool = { (48...57).contains($0) || (65...70).contains($0 & 0xDF) }
        guard !digits.isEmpty, digits.count <= 15, digits.allSatisfy(isHex),
            let size = Int(String(decoding: digits, as: UTF8.self), radix: 16), size >= 0
        else {
            throw ResponseFailure.malformed(
                "bad chunk size '\(Self.printable(String(decoding: line, as: UTF8.self)))'")
        }
        return size
    }

    private func trailers() throws {
        var budget = Self.maxHeadBytes
        while true {
            let line = try line(limit: Self.maxLineBytes, what: "the trailer")
            if line.isEmpty { return }
            budget -= line.count + 2
            guard budget >= 0 else {
                throw ResponseFailure.tooLarge(
                    "the trailer is longer than \(Self.maxHeadBytes) bytes")
            }
        }
    }
}
