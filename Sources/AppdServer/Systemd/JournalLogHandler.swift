import CSystemd
import Dispatch
import Glibc
import Logging
import Synchronization

/// swift-log to the systemd journal with its fields (systemd.journal-fields(7)), sent with
/// libsystemd's `sd_journal_sendv`. Metadata becomes fields: `app`, `instance`, `pid` are
/// `APPD_APP`, `APPD_INSTANCE`, `APPD_PID` (so `journalctl APPD_APP=com.example.hello`), any
/// other key `APPD_<KEY>`.
public struct JournalLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    let label: String
    let writer: JournalWriter

    public init(label: String) {
        self.init(label: label, writer: .shared)
    }

    init(label: String, writer: JournalWriter) {
        self.label = label
        self.writer = writer
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Whether appd's stderr is connected to the journal: systemd sets `$JOURNAL_STREAM` to
    /// the device and inode of that stream ("dev:ino"), and a redirected stderr no longer
    /// matches (systemd.exec(5)).
    public static func stderrIsJournal(_ environment: [String: String]) -> Bool {
        guard let value = environment["JOURNAL_STREAM"] else { return false }
        var info = stat()
        guard fstat(2, &info) == 0 else { return false }
        return value == "\(info.st_dev):\(info.st_ino)"
    }

    public func log(event: LogEvent) {
        writer.send(Self.fields(event, metadata: metadata))
    }

    static func fields(_ event: LogEvent, metadata: Logger.Metadata) -> [(String, String)] {
        var fields: [(String, String)] = [
            ("MESSAGE", "\(event.message)"),
            ("PRIORITY", String(Self.priority(event.level))),
            ("SYSLOG_IDENTIFIER", "appd"),
            ("CODE_FILE", event.file), ("CODE_LINE", String(event.line)),
            ("CODE_FUNC", event.function),
        ]
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 })
            .sorted(by: { $0.key < $1.key })
        {
            fields.append((Self.fieldName(key), "\(value)"))
        }
        return fields
    }

    /// A journal field name: uppercase letters, digits and underscores, not starting with one.
    static func fieldName(_ key: String) -> String {
        let cleaned = key.uppercased().map { $0.isLetter && $0.isASCII || $0.isNumber ? $0 : "_" }
        return "APPD_" + String(cleaned)
    }

    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }
}

/// Hands entries to journald in order from a queue of its own: `sd_journal_sendv` blocks when
/// journald's socket is full, and appd logs from its actors and its event loop. At most
/// `maxPending` entries wait; past that they are dropped and counted, and one entry says how
/// many once the journal takes entries again. Tests give it a sink of their own.
final class JournalWriter: Sendable {
    static let shared = JournalWriter(sink: JournalWriter.sendv)
    static let maxPending = 4096

    private let queue = DispatchQueue(label: "appd.journal")
    private let state = Mutex((pending: 0, dropped: 0))
    private let sink: @Sendable ([(String, String)]) -> Int32

    init(sink: @escaping @Sendable ([(String, String)]) -> Int32) {
        self.sink = sink
    }

    func send(_ fields: [(String, String)]) {
        let queued = state.withLock { state in
            guard state.pending < Self.maxPending else {
                state.dropped += 1
                return false
            }
            state.pending += 1
            return true
        }
        guard queued else { return }
        queue.async { [self] in
            let dropped = state.withLock { state in
                defer { state.dropped = 0 }
                return state.dropped
            }
            if dropped > 0 {
                _ = sink([
                    ("MESSAGE", "appd: \(dropped) log entries were dropped (journald too slow)"),
                    ("PRIORITY", "4"), ("SYSLOG_IDENTIFIER", "appd"),
                ])
            }
            _ = sink(fields)
            state.withLock { $0.pending -= 1 }
        }
    }

    /// Waits until every queued entry went out (before the process exits).
    func flush() { queue.sync {} }

    /// One entry through libsystemd: each field `NAME=value` in an iovec (values may hold
    /// newlines and any bytes; libsystemd encodes them, and moves large entries to a memfd).
    /// 0, or a negative errno (no journal: -ENOENT, -ECONNREFUSED).
    static func sendv(_ fields: [(String, String)]) -> Int32 {
        var bytes: [UInt8] = []
        var ranges: [(offset: Int, count: Int)] = []
        for (name, value) in fields {
            let field = Array("\(name)=\(value)".utf8)
            ranges.append((bytes.count, field.count))
            bytes += field
        }
        return bytes.withUnsafeMutableBytes { buffer -> Int32 in
            guard let base = buffer.baseAddress else { return -EINVAL }
            var vectors = ranges.map { iovec(iov_base: base + $0.offset, iov_len: $0.count) }
            return vectors.withUnsafeMutableBufferPointer {
                sd_journal_sendv($0.baseAddress, Int32($0.count))
            }
        }
    }
}

extension JournalLogHandler {
    /// Waits until appd's own entries went out (before the process exits).
    public static func flush() { JournalWriter.shared.flush() }
}
