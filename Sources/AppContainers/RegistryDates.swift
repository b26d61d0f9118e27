import AppdBase
import Foundation
import GRDB

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
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let fraction = Int(milliseconds - seconds * 1000)
        return UTCTime(secondsSince1970: seconds).text(separator: " ") + "."
            + UTCTime.digits(fraction, 3)
    }

    /// The inverse of `text(for:)`; also takes no fraction, or one of 1 to 9 digits. nil for
    /// anything else.
    static func date(from text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 19, bytes[10] == UInt8(ascii: " "), var time = UTCTime.fields(bytes),
            (1...12).contains(time.month), (1...31).contains(time.day), time.hour < 24,
            time.minute < 60,
            time.second < 61
        else { return nil }
        var fraction = 0.0
        if bytes.count > 19 {
            guard bytes[19] == UInt8(ascii: "."), (21...29).contains(bytes.count),
                let digits = UTCTime.number(bytes[20...])
            else { return nil }
            fraction = Double(digits) / pow(10, Double(bytes.count - 20))
        }
        // A leap second (:60) rolls over into the next minute, as timegm did.
        let leap = time.second == 60 ? 1 : 0
        time.second -= leap
        return Date(timeIntervalSince1970: Double(time.secondsSince1970 + Int64(leap)) + fraction)
    }
}
