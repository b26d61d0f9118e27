import Foundation

/// A `.strings` table: `"key" = "value";` pairs in the old (OpenStep) syntax — UTF-8, or UTF-16
/// with a byte-order mark as Xcode used to write them — or the same dictionary as a binary or
/// XML property list (what Xcode compiles them to).
///
/// Parsed here rather than by Foundation's OpenStep reader so the accepted syntax is the same on
/// every platform and an error names the line.
enum StringsFile {
    static func parse(_ data: Data, name: String) throws -> [String: String] {
        if data.starts(with: Array("bplist".utf8)) || looksLikeXML(data) {
            let value = try? PropertyListSerialization.propertyList(from: data, format: nil)
            guard let table = value as? [String: Any] else {
                throw AppRuntimeError(.invalidData, "\(name) is not a property list dictionary")
            }
            return table.compactMapValues { $0 as? String }
        }
        guard let text = decode(data) else {
            throw AppRuntimeError(
                .invalidData, "\(name) is neither UTF-8 nor UTF-16 with a byte-order mark")
        }
        var parser = Parser(scalars: Array(text.unicodeScalars), name: name)
        return try parser.table()
    }

    private static func looksLikeXML(_ data: Data) -> Bool {
        let head = String(decoding: data.prefix(64), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        return head.hasPrefix("<?xml") || head.hasPrefix("<plist")
            || head.hasPrefix("<!DOCTYPE plist")
    }

    private static func decode(_ data: Data) -> String? {
        let bytes = [UInt8](data.prefix(3))
        if bytes.starts(with: [0xFE, 0xFF]) {
            return String(data: data.dropFirst(2), encoding: .utf16BigEndian)
        }
        if bytes.starts(with: [0xFF, 0xFE]) {
            return String(data: data.dropFirst(2), encoding: .utf16LittleEndian)
        }
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) {
            return String(data: data.dropFirst(3), encoding: .utf8)
        }
        return String(data: data, encoding: .utf8)
    }

    private struct Parser {
        let scalars: [Unicode.Scalar]
        let name: String
        var index = 0
        var line = 1

        init(scalars: [Unicode.Scalar], name: String) {
            self.scalars = scalars
            self.name = name
        }

        mutating func table() throws -> [String: String] {
            var table: [String: String] = [:]
            while true {
                try skipSpaceAndComments()
                guard index < scalars.count else { return table }
                let key = try string()
                try skipSpaceAndComments()
                if peek == ";" {  // `"key";` means the key is its own value
                    index += 1
                    table[key] = key
                    continue
                }
                try expect("=")
                try skipSpaceAndComments()
                let value = try string()
                try skipSpaceAndComments()
                try expect(";")
                table[key] = value
            }
        }

        private var peek: Unicode.Scalar? { index < scalars.count ? scalars[index] : nil }

        private func failure(_ what: String) -> AppRuntimeError {
            AppRuntimeError(.invalidData, "\(name), line \(line): \(what)")
        }

        private mutating func expect(_ scalar: Unicode.Scalar) throws {
            guard peek == scalar else {
                throw failure(
                    peek.map { "expected '\(scalar)', found '\($0)'" }
                        ?? "expected '\(scalar)' at the end")
            }
            index += 1
        }

        private mutating func skipSpaceAndComments() throws {
            while let scalar = peek {
                if scalar == "\n" {
                    line += 1
                    index += 1
                } else if scalar.properties.isWhitespace {
                    index += 1
                } else if scalar == "/", index + 1 < scalars.count, scalars[index + 1] == "/" {
                    while let next = peek, next != "\n" { index += 1 }
                } else if scalar == "/", index + 1 < scalars.count, scalars[index + 1] == "*" {
                    index += 2
                    while index + 1 < scalars.count,
                        !(scalars[index] == "*" && scalars[index + 1] == "/")
                    {
                        if scalars[index] == "\n" { line += 1 }
                        index += 1
                    }
                    guard index + 1 < scalars.count else {
                        throw failure("unterminated /* comment")
                    }
                    index += 2
                } else {
                    return
                }
            }
        }

        /// A quoted string with escapes, or a bare word of the OpenStep unquoted set.
        private mutating func string() throws -> String {
            guard let first = peek else { throw failure("expected a string at the end") }
            if first != "\"" {
                var word = String.UnicodeScalarView()
                while let scalar = peek, Self.isUnquoted(scalar) {
                    word.append(scalar)
                    index += 1
                }
                guard !word.isEmpty else { throw failure("expected a string, found '\(first)'") }
                return String(word)
            }
            index += 1
            var result = String.UnicodeScalarView()
            while let scalar = peek {
                index += 1
                switch scalar {
                case "\"": return String(result)
                case "\\": result.append(try escape())
                default:
                    if scalar == "\n" { line += 1 }
                    result.append(scalar)
                }
            }
            throw failure("unterminated string")
        }

        private mutating func escape() throws -> Unicode.Scalar {
            guard let scalar = peek else { throw failure("unterminated escape") }
            index += 1
            switch scalar {
            case "n": return "\n"
            case "t": return "\t"
            case "r": return "\r"
            case "a": return "\u{07}"
            case "b": return "\u{08}"
            case "f": return "\u{0C}"
            case "v": return "\u{0B}"
            case "U", "u":
                var value: UInt32 = 0
                for _ in 0..<4 {
                    guard let digit = peek, digit.isASCII,
                        let hex = UInt32(String(digit), radix: 16)
                    else { throw failure("\\U needs four hex digits") }
                    value = value * 16 + hex
                    index += 1
                }
                return Unicode.Scalar(value) ?? "\u{FFFD}"
            case "0"..."7":
                var value = UInt32(String(scalar), radix: 8) ?? 0
                for _ in 0..<2 {
                    guard let digit = peek, ("0"..."7").contains(digit) else { break }
                    value = value * 8 + (UInt32(String(digit), radix: 8) ?? 0)
                    index += 1
                }
                return Unicode.Scalar(value) ?? "\u{FFFD}"
            default:
                if scalar == "\n" { line += 1 }
                return scalar  // \" \\ \' and anything else stand for themselves
            }
        }

        private static func isUnquoted(_ scalar: Unicode.Scalar) -> Bool {
            scalar.isASCII
                && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)
                    || "_$+/:.-".unicodeScalars.contains(scalar))
        }
    }
}
