import Foundation
import Glibc
import Logging

/// swift-log to the systemd journal through its native protocol (systemd.journal-fields(7),
/// "Native Journal Protocol"): one datagram per entry to /run/systemd/journal/socket, each
/// field `NAME=value\n`, or `NAME\n` + 64-bit little-endian length + bytes + `\n` for values with
/// a newline. Metadata becomes fields: `app`, `instance`, `pid` are `APPD_APP`,
/// `APPD_INSTANCE`, `APPD_PID` (so `journalctl APPD_APP=com.example.hello`), any other key
/// `APPD_<KEY>`. Written directly, like sd_journal_send, without linking libsystemd.
public struct JournalLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    let label: String
    let socketPath: String

    public init(label: String, socketPath: String = "/run/systemd/journal/socket") {
        self.label = label
        self.socketPath = socketPath
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
        var fields: [(String, String)] = [
            ("MESSAGE", "\(event.message)"),
            ("PRIORITY", String(Self.priority(event.level))),
            ("SYSLOG_IDENTIFIER", "appd"),
            ("CODE_FILE", event.file), ("CODE_LINE", String(event.line)), ("CODE_FUNC", event.function),
        ]
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }) {
            fields.append((Self.fieldName(key), "\(value)"))
        }
        send(Self.encode(fields))
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

    static func encode(_ fields: [(String, String)]) -> [UInt8] {
        var datagram: [UInt8] = []
        for (name, value) in fields {
            datagram += Array(name.utf8)
            let bytes = Array(value.utf8)
            if bytes.contains(UInt8(ascii: "\n")) {
                datagram.append(UInt8(ascii: "\n"))
                withUnsafeBytes(of: UInt64(bytes.count).littleEndian) { datagram += $0 }
            } else {
                datagram.append(UInt8(ascii: "="))
            }
            datagram += bytes
            datagram.append(UInt8(ascii: "\n"))
        }
        return datagram
    }

    /// Entries larger than a datagram (journald then expects a memfd) are cut to fit: appd's
    /// own messages are short.
    func send(_ datagram: [UInt8]) {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var message = datagram
        while true {
            let sent = Self.send(message, fd: fd, to: socketPath)
            guard sent < 0, errno == EMSGSIZE, message.count > 4096 else { return }
            message = Self.encode([("MESSAGE", String(decoding: datagram.prefix(4000), as: UTF8.self) + "…")])
        }
    }

    /// One datagram to journald's socket at `path` over `fd`: sendto's result (errno set on -1).
    static func send(_ datagram: [UInt8], fd: Int32, to path: String) -> Int {
        guard let (unix, length) = SystemdNotifier.unixAddress(path) else {
            errno = ENAMETOOLONG
            return -1
        }
        var address = unix
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                datagram.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), generic, length) }
            }
        }
    }
}
