import AppdBase

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// The JSON of the API: ISO 8601 dates, sorted keys (stable output for diffs and tests).
public enum APICoding {
    public static func encoder(pretty: Bool = false) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting =
            pretty
            ? [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            : [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(date.formatted(Self.fractional))
        }
        return encoder
    }

    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            if let date = Self.utcDate(text) { return date }
            if let date = try? Self.fractional.parse(text) { return date }
            if let date = try? Date.ISO8601FormatStyle().parse(text) { return date }
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "'\(text)' is not an ISO 8601 date")
        }
        return decoder
    }

    /// Milliseconds: instances started in the same second still sort by start.
    static let fractional = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// `2026-11-24T10:00:00.123Z` (what the encoder writes: UTC, 0 to 9 fraction digits) read
    /// by arithmetic, to the same `Date` as `fractional.parse` gives (TextFormattingTests
    /// compares them): the format style builds a Calendar and loads the time zone on its first
    /// parse, a third of decoding an instance in appctl. Anything else is nil (left to it).
    public static func utcDate(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { utcDate($0) }
    }

    static func utcDate(_ bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        guard bytes.count >= 20, bytes.count <= 30, bytes[bytes.count - 1] == UInt8(ascii: "Z"),
            bytes[10] == UInt8(ascii: "T"), let time = UTCTime.fields(bytes), time.isValid,
            (1970...9999).contains(time.year)
        else { return nil }
        var nanoseconds = 0
        if bytes.count > 20 {
            // `.` and 1 to 9 digits.
            let digits = bytes.count - 21
            guard bytes[19] == UInt8(ascii: "."), (1...9).contains(digits),
                let fraction = UTCTime.number(bytes[20..<(20 + digits)])
            else { return nil }
            nanoseconds = fraction
            for _ in digits..<9 { nanoseconds *= 10 }
        } else if bytes[19] != UInt8(ascii: "Z") {
            return nil
        }
        return Date(
            timeIntervalSinceReferenceDate: Double(time.secondsSince1970 - 978_307_200)
                + Double(nanoseconds) / 1e9)
    }
}

/// Where the daemon listens, as client and server both work it out.
public enum APISocket {
    public static let defaultPath = "/run/appd/appd.sock"
    public static let defaultRuntimeDirectory = "/run/appd"
    public static let defaultStateRoot = "/var/lib/appd"

    /// The daemon's runtime directory (instance records, the socket): `/run/appd` for the
    /// system's state root, `<root>/run` for a private one, so a test daemon never meets the
    /// system's records.
    public static func runtimeDirectory(stateRoot: String) -> String {
        stateRoot == defaultStateRoot ? defaultRuntimeDirectory : "\(stateRoot)/run"
    }

    /// The file in the runtime directory where a daemon records the socket it serves (one
    /// absolute path and a newline), so that `--root DIR` finds a daemon started with `--socket`.
    public static func socketRecordPath(runtimeDirectory: String) -> String {
        "\(runtimeDirectory)/appd.socket-path"
    }

    /// Where a client's socket path came from: what the "cannot connect" hint names.
    public enum Source: Sendable, Equatable {
        /// `--socket`.
        case flag
        /// `$APPD_SOCKET`.
        case environment
        /// The daemon of `root` (given by `via`: `--root` or `APPD_ROOT`, or nil for the
        /// system's): the path it recorded in `record`, or, when it recorded none, the
        /// runtime directory's `appd.sock`.
        case root(String, via: String?, record: String, recorded: Bool)
    }

    /// `--socket`, else `$APPD_SOCKET`, else the socket of `--root`/`$APPD_ROOT`'s daemon, else
    /// the system daemon's; a daemon's is the one it recorded (`socketRecordPath`), else the
    /// `appd.sock` of its runtime directory (`/run/appd/appd.sock` for the system's).
    public static func resolve(explicit: String?, root: String?, environment: [String: String])
        -> String
    {
        locate(explicit: explicit, root: root, environment: environment).path
    }

    public static func locate(explicit: String?, root: String?, environment: [String: String])
        -> (path: String, source: Source)
    {
        if let explicit, !explicit.isEmpty { return (explicit, .flag) }
        if let socket = environment["APPD_SOCKET"], !socket.isEmpty {
            return (socket, .environment)
        }
        let fromEnvironment = environment["APPD_ROOT"].flatMap { $0.isEmpty ? nil : $0 }
        let via = root != nil ? "--root" : fromEnvironment != nil ? "APPD_ROOT" : nil
        let stateRoot = root ?? fromEnvironment ?? defaultStateRoot
        let runtime = runtimeDirectory(stateRoot: stateRoot)
        let record = socketRecordPath(runtimeDirectory: runtime)
        if let recorded = readRecord(record) {
            return (recorded, .root(stateRoot, via: via, record: record, recorded: true))
        }
        return ("\(runtime)/appd.sock", .root(stateRoot, via: via, record: record, recorded: false))
    }

    /// The path in a socket record: one absolute path of at most 4096 bytes without control
    /// characters, else nil (a record that is not one is ignored, as if absent).
    static func readRecord(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4098)
        var count = 0
        while count < buffer.count {
            let read = buffer.withUnsafeMutableBytes { buffer in
                retryingInterrupts {
                    Glibc.read(fd, buffer.baseAddress.map { $0 + count }, buffer.count - count)
                }
            }
            guard read > 0 else { break }
            count += read
        }
        var bytes = buffer[..<count]
        if bytes.last == UInt8(ascii: "\n") { bytes = bytes.dropLast() }
        guard bytes.count <= 4096, bytes.first == UInt8(ascii: "/"),
            !bytes.contains(where: { $0 < 0x20 || $0 == 0x7F })
        else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}
