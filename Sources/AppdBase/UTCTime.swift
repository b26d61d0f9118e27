/// The one UTC calendar codec of appd: seconds since 1970 to and from `YYYY-MM-DD HH:MM:SS`
/// fields, without Foundation's calendars (ICU: megabytes paged in by the first formatted date)
/// and without `gmtime_r`/`timegm` (no time zone files read, no `TZ` consulted). Proleptic
/// Gregorian, after H. Hinnant's `civil_from_days` and `days_from_civil`. The text forms
/// (the API's RFC 3339, the registry's "yyyy-MM-dd HH:mm:ss.SSS", ICU's quirks where a client
/// must print what ICU printed) are their modules' own; the calendar is this.
public struct UTCTime: Equatable, Sendable, CustomStringConvertible {
    public var year: Int
    public var month: Int
    public var day: Int
    public var hour: Int
    public var minute: Int
    public var second: Int

    public init(year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0, second: Int = 0) {
        self.year = year
        self.month = month
        self.day = day
        self.hour = hour
        self.minute = minute
        self.second = second
    }

    /// The calendar fields of `seconds` since 1970-01-01T00:00:00Z (negative before it).
    public init(secondsSince1970 seconds: Int64) {
        let (quotient, remainder) = seconds.quotientAndRemainder(dividingBy: 86_400)
        let days = remainder < 0 ? quotient - 1 : quotient
        let secondOfDay = Int(remainder < 0 ? remainder + 86_400 : remainder)
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        day = Int(dayOfYear - (153 * monthIndex + 2) / 5 + 1)
        month = Int(monthIndex < 10 ? monthIndex + 3 : monthIndex - 9)
        year = Int(yearOfEra + era * 400) + (month <= 2 ? 1 : 0)
        hour = secondOfDay / 3600
        minute = secondOfDay / 60 % 60
        second = secondOfDay % 60
    }

    /// Seconds since 1970 of these fields. Out-of-range fields roll over (hour 24 is the next
    /// day's 00, February 30 is March 1 or 2), as ICU and `timegm` do; `isValid` tells them apart.
    public var secondsSince1970: Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let m = Int64(month)
        let dayOfYear = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return days * 86_400 + Int64(hour) * 3600 + Int64(minute) * 60 + Int64(second)
    }

    /// Whether every field is in its range: month 1-12, the day within that month (leap years
    /// counted), hour 0-23, minute 0-59, second 0-59 (no leap second).
    public var isValid: Bool {
        guard (1...12).contains(month), (0...23).contains(hour), (0...59).contains(minute),
            (0...59).contains(second)
        else { return false }
        return (1...UTCTime.daysIn(month: month, year: year)).contains(day)
    }

    public static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// `YYYY-MM-DD` `separator` `HH:MM:SS` (RFC 3339 uses "T", the registry " ").
    public func text(separator: Character = "T") -> String {
        "\(UTCTime.digits(year, 4))-\(UTCTime.digits(month, 2))-\(UTCTime.digits(day, 2))"
            + "\(separator)\(UTCTime.digits(hour, 2)):\(UTCTime.digits(minute, 2)):"
            + UTCTime.digits(second, 2)
    }

    public var description: String { text() + "Z" }

    /// Reads `YYYY-MM-DD?HH:MM:SS` at the start of `bytes` (any single byte as `?`: callers check
    /// the one they take). Nil unless every field is digits; ranges are the caller's (`isValid`).
    public static func fields(_ bytes: some Collection<UInt8>) -> UTCTime? {
        let bytes = Array(bytes.prefix(19))
        guard bytes.count == 19, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
            let year = number(bytes[0..<4]), let month = number(bytes[5..<7]),
            let day = number(bytes[8..<10]), let hour = number(bytes[11..<13]),
            let minute = number(bytes[14..<16]), let second = number(bytes[17..<19])
        else { return nil }
        return UTCTime(
            year: year, month: month, day: day, hour: hour, minute: minute, second: second)
    }

    /// The decimal value of a run of ASCII digits; nil if any byte is not a digit or it is empty.
    public static func number(_ digits: some Collection<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var value = 0
        for byte in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
    }

    /// `value` in decimal, zero-padded to `width` (a minus sign counts toward it).
    public static func digits(_ value: Int, _ width: Int) -> String {
        let text = String(value.magnitude)
        let padding = String(
            repeating: "0", count: max(0, width - text.count - (value < 0 ? 1 : 0)))
        return (value < 0 ? "-" : "") + padding + text
    }
}
