import AppdBase

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What appctl prints with, on FoundationEssentials alone: Foundation's formatters
/// (ISO8601DateFormatter, ByteCountFormatter, String(format:), NSString's padding and trimming)
/// drag FoundationInternationalization and ICU's data into appctl, and loading them was most of
/// its start-up. Each helper prints exactly what the Foundation API it replaces printed
/// (TextFormattingTests compares them), so no output changes.
public enum TextFormatting {
    /// `2026-11-24T10:00:00Z`: what `ISO8601DateFormatter().string(from:)` printed (UTC,
    /// whole seconds of the time rounded to milliseconds, as ICU did).
    public static func iso8601(_ date: Date) -> String {
        guard let (seconds, _) = roundedMilliseconds(date) else {
            return date.formatted(Date.ISO8601FormatStyle())
        }
        return civil(seconds) + "Z"
    }

    /// `2026-11-24T10:00:00.500Z`: what ISO8601DateFormatter with fractional seconds printed,
    /// milliseconds rounded to the nearest (the API's encoder truncates instead; this is what
    /// `--since` has always sent).
    public static func rfc3339(_ date: Date) -> String {
        guard let (seconds, millis) = roundedMilliseconds(date) else {
            return date.formatted(APICoding.fractional)
        }
        return civil(seconds) + printf(".%03lldZ", millis)
    }

    /// Whole seconds since 1970 and milliseconds, of the time rounded to milliseconds; nil
    /// outside the years 1583...9999 (ICU printed earlier dates in the Julian calendar, and no
    /// date appd keeps is either).
    static func roundedMilliseconds(_ date: Date) -> (Int64, Int64)? {
        let milliseconds = (date.timeIntervalSince1970 * 1000).rounded()
        // 1583-01-01 and 10000-01-01.
        guard milliseconds.isFinite, milliseconds >= -12_212_553_600_000,
            milliseconds < 253_402_300_800_000
        else {
            return nil
        }
        let total = Int64(milliseconds)
        let (seconds, fraction) = total.quotientAndRemainder(dividingBy: 1000)
        return fraction < 0 ? (seconds - 1, fraction + 1000) : (seconds, fraction)
    }

    /// `YYYY-MM-DDTHH:MM:SS` of seconds since 1970, UTC.
    static func civil(_ seconds: Int64) -> String { UTCTime(secondsSince1970: seconds).text() }

    /// An RFC 3339 time as ISO8601DateFormatter took it, with or without fractional seconds:
    /// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)`, spaces either side, the fraction cut to
    /// milliseconds; as ICU did, hour 24 and days past the month's end (`02-30`) roll over, the
    /// offset's colon or minutes may be left out, and what follows the zone is ignored. Nil for
    /// anything else.
    public static func parseRFC3339(_ text: String) -> Date? {
        let bytes = Array(text.trimmingWhitespace().utf8)
        var index = 0
        func number(_ width: Int) -> Int? {
            guard index + width <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<(index + width)] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            index += width
            return value
        }
        func expect(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }
        guard let year = number(4), expect(0x2D), let month = number(2), expect(0x2D),
            let day = number(2),
            expect(0x54), let hour = number(2), expect(0x3A), let minute = number(2), expect(0x3A),
            let second = number(2)
        else { return nil }
        var milliseconds = 0
        if expect(0x2E) {
            var digits = 0
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
                if digits < 3 { milliseconds = milliseconds * 10 + Int(bytes[index] - 0x30) }
                digits += 1
                index += 1
            }
            guard digits > 0 else { return nil }
            for _ in min(digits, 3)..<3 { milliseconds *= 10 }
        }
        var offset = 0
        if expect(0x5A) {
            offset = 0
        } else if index < bytes.count, bytes[index] == 0x2B || bytes[index] == 0x2D {
            let sign = bytes[index] == 0x2D ? -1 : 1
            index += 1
            // One or two digits of hours; the minutes, with or without their colon, may be left
            // out (what follows is then ignored).
            guard let hours = number(2) ?? number(1) else { return nil }
            let colon = expect(0x3A)
            let minutes = number(2) ?? 0
            if colon, minutes == 0 { index = bytes.count }
            guard hours <= 23, minutes <= 59 else { return nil }
            offset = sign * (hours * 3600 + minutes * 60)
        } else {
            return nil
        }
        // Whatever follows the zone is ignored, as ICU ignored it.
        guard (1...12).contains(month), hour <= 24, minute <= 59, second <= 59 else {
            return nil
        }
        guard (1...31).contains(day), year >= 1583 else { return nil }
        let time = UTCTime(
            year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        let seconds = Int(time.secondsSince1970) - offset
        // As CFDateFormatter turned ICU's milliseconds into a Date.
        let udate = Double(seconds * 1000 + milliseconds)
        return Date(timeIntervalSinceReferenceDate: udate / 1000.0 - 978_307_200.0)
    }

    /// printf-style formatting (`%.1f`, `%g`, `%02ld`), as `String(format:)` did for numbers.
    public static func printf(_ format: String, _ arguments: CVarArg...) -> String {
        withVaList(arguments) { list in
            var buffer = [CChar](repeating: 0, count: 128)
            let needed = buffer.withUnsafeMutableBufferPointer {
                vsnprintf($0.baseAddress, $0.count, format, list)
            }
            guard needed >= 0 else { return "" }
            if Int(needed) >= buffer.count {
                buffer = [CChar](repeating: 0, count: Int(needed) + 1)
                _ = withVaList(arguments) { again in
                    buffer.withUnsafeMutableBufferPointer {
                        vsnprintf($0.baseAddress, $0.count, format, again)
                    }
                }
            }
            return String(
                decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    /// A size as `ByteCountFormatter.string(fromByteCount:countStyle: .file)` printed it:
    /// `Zero KB`, `1 byte`, `512 bytes`, `42 KB`, `1.5 MB`, `3.25 GB` (decimal units; no
    /// fraction below MB, one for MB, two above).
    public static func byteCount(_ count: Int64) -> String {
        if count == 0 { return "Zero KB" }
        let value = Double(count)
        if count == 1 || count == -1 { return "\(decimal(value, fractionDigits: 0)) byte" }
        let units = ["KB", "MB", "GB", "TB", "PB", "EB"]
        var size = 1000.0
        if abs(value) < size { return "\(decimal(value, fractionDigits: 0)) bytes" }
        for (index, unit) in units.enumerated() {
            let next = size * 1000
            if abs(value) < next || unit == "EB" {
                let scaled = value / size
                switch index {
                case 0: return "\(decimal(scaled, fractionDigits: 0)) \(unit)"
                case 1: return "\(decimal(scaled, fractionDigits: 1)) \(unit)"
                default:
                    // ByteCountFormatter rounded negative values to hundredths first.
                    let rounded = scaled < 0 ? (scaled * 100).rounded() / 100 : scaled
                    return "\(decimal(rounded, fractionDigits: 2)) \(unit)"
                }
            }
            size = next
        }
        return "\(decimal(value, fractionDigits: 0)) bytes"
    }

    /// NumberFormatter's `.decimal` style with at most `fractionDigits` digits: the shortest
    /// decimal form of `value` rounded half to even, trailing zeros dropped, groups of three
    /// digits separated by commas.
    static func decimal(_ value: Double, fractionDigits: Int) -> String {
        guard value.isFinite else { return "\(value)" }
        // The shortest round-tripping digits, without an exponent.
        var digits: [UInt8] = []
        var exponent = 0  // value = 0.d1d2d3... × 10^exponent
        let negative = value < 0
        let text = "\(Swift.abs(value))"
        var mantissa = Substring(text)
        var power = 0
        if let e = text.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            mantissa = text[..<e]
            power = Int(text[text.index(after: e)...]) ?? 0
        }
        var pointSeen = false
        var integerDigits = 0
        for character in mantissa {
            if character == "." {
                pointSeen = true
            } else if let digit = character.asciiValue, digit >= 48, digit <= 57 {
                digits.append(digit - 48)
                if !pointSeen { integerDigits += 1 }
            }
        }
        exponent = integerDigits + power
        // Strip leading zeros.
        while let first = digits.first, first == 0, digits.count > 1 {
            digits.removeFirst()
            exponent -= 1
        }
        if digits.allSatisfy({ $0 == 0 }) { return negative ? "-0" : "0" }
        // Round to `fractionDigits` places after the point: keep exponent + fractionDigits digits.
        let keep = exponent + fractionDigits
        if keep < 0 {
            return "0"
        }
        if keep < digits.count {
            let dropped = Array(digits[keep...])
            digits = Array(digits[..<keep])
            let first = dropped[0]
            let rest = dropped.dropFirst().contains { $0 != 0 }
            let roundUp: Bool
            if first > 5 || (first == 5 && rest) {
                roundUp = true
            } else if first == 5 {
                roundUp = (digits.last ?? 0) % 2 == 1
            } else {
                roundUp = false
            }
            if roundUp {
                var index = digits.count - 1
                while index >= 0 {
                    if digits[index] == 9 {
                        digits[index] = 0
                        index -= 1
                    } else {
                        digits[index] += 1
                        break
                    }
                }
                if index < 0 {
                    digits.insert(1, at: 0)
                    exponent += 1
                }
            }
        }
        if digits.isEmpty || digits.allSatisfy({ $0 == 0 }) { return "0" }
        var integer = ""
        var fraction = ""
        for (index, digit) in digits.enumerated() {
            let character = Character(Unicode.Scalar(48 + digit))
            if index < exponent { integer.append(character) } else { fraction.append(character) }
        }
        if exponent > digits.count {
            integer += String(repeating: "0", count: exponent - digits.count)
        }
        if exponent < 0 { fraction = String(repeating: "0", count: -exponent) + fraction }
        if integer.isEmpty { integer = "0" }
        while fraction.last == "0" { fraction.removeLast() }
        var grouped = ""
        for (index, character) in integer.enumerated() {
            if index > 0, (integer.count - index) % 3 == 0 { grouped.append(",") }
            grouped.append(character)
        }
        return (negative ? "-" : "") + grouped + (fraction.isEmpty ? "" : ".\(fraction)")
    }
}

extension String {
    /// `padding(toLength:withPad: " ", startingAt: 0)` as NSString did it: counted in UTF-16
    /// units, spaces added up to `length`, or cut to `length`.
    public func padded(toLength length: Int) -> String {
        let units = utf16.count
        if units >= length {
            if units == length { return self }
            return String(decoding: Array(utf16.prefix(Swift.max(0, length))), as: UTF16.self)
        }
        return self + String(repeating: " ", count: length - units)
    }

    /// `trimmingCharacters(in: .whitespaces)`: spaces (Unicode Zs) and tabs off both ends.
    public func trimmingWhitespace() -> String {
        func isWhitespace(_ scalar: Unicode.Scalar) -> Bool {
            scalar == "\t" || scalar.properties.generalCategory == .spaceSeparator
        }
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !isWhitespace($0) }),
            let last = scalars.lastIndex(where: { !isWhitespace($0) })
        else { return "" }
        return String(scalars[first...last])
    }
}

extension Substring {
    public func trimmingWhitespace() -> String { String(self).trimmingWhitespace() }
}
