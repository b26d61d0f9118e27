import Foundation
import GRDB
import Glibc

/// Dates in the registry, in the text GRDB stores by default ("yyyy-MM-dd HH:mm:ss.SSS", UTC),
/// but written and read without Foundation's `DateFormatter` and `Calendar`, which GRDB's
/// defaults use and which are ICU's: the daemon's first registry save paged in ~4 MB of ICU
/// code and locale data (bench-api's RSS, traced with `perf record -e page-faults`). Registries
/// written before read the same.
enum RegistryDates {
    static let encoding = DatabaseDateEncodingStrategy.custom { text(for: $0) }
    static let decoding = DatabaseDateDecodingStrategy.custom { value in
        String.fromDatabaseValue(value).flatMap(date(from:))
    }

    /// `date` as "yyyy-MM-dd HH:mm:ss.SSS" in UTC, to the nearest millisecond as DateFormatter.
    static func text(for date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded())
        var seconds = time_t(milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000)
        let fraction = Int(milliseconds - Int64(seconds) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2)) "
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(fraction), 3))"
    }

    /// The inverse of `text(for:)`; also takes no fraction, or one of 1 to 9 digits. nil for
    /// anything else.
    static func date(from text: String) -> Date? {
        let bytes = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[range] {
                guard (48...57).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }
        guard bytes.count >= 19, bytes[4] == 45, bytes[7] == 45, bytes[10] == 32, bytes[13] == 58, bytes[16] == 58,
            let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var fraction = 0.0
        if bytes.count > 19 {
            guard bytes[19] == 46, (21...29).contains(bytes.count), let digits = number(20..<bytes.count) else { return nil }
            fraction = Double(digits) / pow(10, Double(bytes.count - 20))
        }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        return Date(timeIntervalSince1970: Double(timegm(&parts)) + fraction)
    }
}
