import Foundation
import PrintableText

/// One audit record as the kernel sends it on the audit netlink socket: a type and text such as
/// `audit(1795478830.227:288): domain=1de9b03ad blockers=fs.write_file path="/dev/null" …`.
/// The text carries strings an app chose (file names, its command name), so it is read as
/// hostile: bounded, never trusted to be well formed; a record that does not parse is skipped.
struct AuditRecord: Sendable, Equatable {
    /// AUDIT_SYSCALL, AUDIT_SECCOMP, AUDIT_LANDLOCK_ACCESS, AUDIT_LANDLOCK_DOMAIN, AUDIT_EOE.
    static let login: UInt16 = 1006
    static let syscallType: UInt16 = 1300
    static let endOfEvent: UInt16 = 1320
    static let seccompType: UInt16 = 1326
    static let landlockAccess: UInt16 = 1423
    static let landlockDomain: UInt16 = 1424

    /// The most fields and the longest value kept from one record.
    static let maximumFields = 48
    static let maximumValueBytes = 1024

    var type: UInt16
    /// The event's serial number: every record of one event shares it.
    var serial: UInt64
    var fields: [String: String]
    /// Keys whose value was in quotes (so never hex).
    var quoted: Set<String> = []

    subscript(_ key: String) -> String? { fields[key] }

    init(type: UInt16, serial: UInt64, fields: [String: String]) {
        self.type = type
        self.serial = serial
        self.fields = fields
    }

    /// Nil unless `text` starts with `audit(SECONDS.MILLIS:SERIAL): `.
    init?(type: UInt16, text: Substring) {
        guard text.hasPrefix("audit("), let close = text.firstIndex(of: ")") else { return nil }
        let stamp = text[text.index(text.startIndex, offsetBy: 6)..<close]
        guard let colon = stamp.lastIndex(of: ":"),
            let serial = UInt64(stamp[stamp.index(after: colon)...])
        else { return nil }
        self.type = type
        self.serial = serial
        var rest = text[text.index(after: close)...]
        if rest.hasPrefix(":") { rest = rest.dropFirst() }
        (fields, quoted) = Self.parseFields(rest)
    }

    /// `key=value` pairs separated by spaces; a value is bare (up to the next space) or in
    /// double quotes (the kernel quotes only strings without spaces or quotes, and writes the
    /// others in hex). A later duplicate key does not replace the first.
    static func parseFields(_ text: Substring) -> (fields: [String: String], quoted: Set<String>) {
        var fields: [String: String] = [:]
        var quoted: Set<String> = []
        var index = text.startIndex
        while index < text.endIndex, fields.count < maximumFields {
            while index < text.endIndex, text[index] == " " { index = text.index(after: index) }
            guard let equals = text[index...].firstIndex(of: "=") else { break }
            let key = text[index..<equals]
            var valueStart = text.index(after: equals)
            var value: Substring
            let isQuoted = valueStart < text.endIndex && text[valueStart] == "\""
            if isQuoted {
                valueStart = text.index(after: valueStart)
                let end = text[valueStart...].firstIndex(of: "\"") ?? text.endIndex
                value = text[valueStart..<end]
                index = end < text.endIndex ? text.index(after: end) : end
            } else {
                let end = text[valueStart...].firstIndex(of: " ") ?? text.endIndex
                value = text[valueStart..<end]
                index = end
            }
            // A key has no spaces by construction; one of odd characters is not the kernel's.
            guard !key.isEmpty, key.utf8.count <= 32,
                key.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" })
            else { continue }
            if fields[String(key)] == nil {
                fields[String(key)] = String(
                    decoding: value.utf8.prefix(maximumValueBytes), as: UTF8.self)
                if isQuoted { quoted.insert(String(key)) }
            }
        }
        return (fields, quoted)
    }

    /// A string field as the kernel writes an untrusted string: quoted text, or bare hex when
    /// it held a space, a quote or a control character (control and bidi characters come back
    /// as `\u{..}`, by the one rule for text an app chose: `Printable`).
    func string(_ key: String) -> String? {
        guard let raw = fields[key] else { return nil }
        if raw == "(null)" || raw == "?" { return nil }
        if !quoted.contains(key), let decoded = Self.hexDecoded(raw) { return decoded }
        return raw
    }

    /// Hex text (even length, 0-9A-F) as the text it spells, shown by `Printable`'s rule: the
    /// name an app gave a file reaches the API, the journal and terminals only so.
    static func hexDecoded(_ text: String) -> String? {
        let digits = Array(text.utf8)
        guard digits.count >= 2, digits.count % 2 == 0,
            digits.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x46).contains($0) })
        else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index + 1 < digits.count {
            guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else {
                return nil
            }
            bytes.append(high << 4 | low)
            index += 2
        }
        return Printable(bytes: bytes, limit: nil).description
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case 0x30...0x39: digit - 0x30
        case 0x41...0x46: digit - 0x41 + 10
        default: nil
        }
    }

    func integer(_ key: String) -> Int? { fields[key].flatMap { Int($0) } }
}
