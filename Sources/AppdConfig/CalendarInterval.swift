import Foundation

/// `[App ID] StartCalendarInterval=`: when appd starts a service app, in a subset of systemd's
/// calendar events (systemd.time(7), `OnCalendar=`), in the host's local time:
///
/// - a shorthand: `minutely`, `hourly`, `daily`, `weekly` (Monday 00:00), `monthly`, `yearly`
///   (or `annually`);
/// - or `[WEEKDAYS] [DATE] TIME`: WEEKDAYS `Mon`, `Mon,Wed`, `Mon..Fri` (English names, three
///   letters or whole, any case); DATE `YYYY-MM-DD` or `MM-DD`; TIME `HH:MM` or `HH:MM:SS`.
///   Each number of DATE and TIME is `*` (any), a value, a range `a..b`, a list `a,b`, or a
///   repetition `a/step` or `*/step` (`*:0/15`: every quarter hour).
///
/// Read strictly: anything else is refused with what is wrong. Bounded: a value's lists hold at
/// most what the unit has (60 minutes, 24 hours, ...), and `next(after:)` looks at most
/// `searchDays` days ahead.
public struct CalendarInterval: Sendable, Equatable {
    /// 1 = Monday ... 7 = Sunday; nil: any.
    public var weekdays: Set<Int>?
    public var years: Set<Int>?
    public var months: Set<Int>?
    public var days: Set<Int>?
    /// Sorted, never empty.
    public var hours: [Int]
    public var minutes: [Int]
    public var seconds: [Int]

    /// How far ahead `next(after:)` looks (a date that only comes in a leap year is within it).
    public static let searchDays = 366 * 5
    static let weekdayNames = [
        "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
    ]

    public struct Problem: Error, CustomStringConvertible, Equatable {
        public var description: String
        init(_ description: String) { self.description = description }
    }

    /// Reads `text`; the problem names the part that is wrong.
    public static func parse(_ text: String) -> Result<CalendarInterval, Problem> {
        do {
            return .success(try read(text))
        } catch let problem as Problem {
            return .failure(problem)
        } catch {
            return .failure(Problem("\(error)"))
        }
    }

    private static func read(_ text: String) throws -> CalendarInterval {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard !words.isEmpty else { throw Problem("it is empty") }
        guard text.utf8.count <= 256 else { throw Problem("it is over 256 bytes") }
        if words.count == 1, let shorthand = shorthand(words[0].lowercased()) { return shorthand }
        var rest = words[...]
        var event = CalendarInterval(
            weekdays: nil, years: nil, months: nil, days: nil, hours: [0], minutes: [0],
            seconds: [0])
        if let first = rest.first, first.first?.isLetter == true {
            event.weekdays = try weekdays(first)
            rest = rest.dropFirst()
        }
        if let first = rest.first, first.contains("-"), !first.contains(":") {
            let parts = first.split(separator: "-", omittingEmptySubsequences: false).map(
                String.init)
            guard parts.count == 2 || parts.count == 3 else {
                throw Problem("'\(first)' is not a date (YYYY-MM-DD or MM-DD)")
            }
            if parts.count == 3 { event.years = try values(parts[0], 1970...9999, "year") }
            event.months = try values(parts[parts.count - 2], 1...12, "month")
            event.days = try values(parts[parts.count - 1], 1...31, "day")
            rest = rest.dropFirst()
        }
        guard let time = rest.first else {
            throw Problem("no time (HH:MM): '\(text)'")
        }
        guard rest.count == 1 else {
            throw Problem("'\(rest.dropFirst().joined(separator: " "))' after the time")
        }
        let parts = time.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 || parts.count == 3 else {
            throw Problem("'\(time)' is not a time (HH:MM or HH:MM:SS)")
        }
        event.hours = try sorted(values(parts[0], 0...23, "hour"), 0...23)
        event.minutes = try sorted(values(parts[1], 0...59, "minute"), 0...59)
        event.seconds =
            parts.count == 3 ? try sorted(values(parts[2], 0...59, "second"), 0...59) : [0]
        return event
    }

    private static func shorthand(_ word: String) -> CalendarInterval? {
        let any = CalendarInterval(
            weekdays: nil, years: nil, months: nil, days: nil, hours: [0], minutes: [0],
            seconds: [0])
        var event = any
        switch word {
        case "minutely":
            event.hours = Array(0...23)
            event.minutes = Array(0...59)
        case "hourly": event.hours = Array(0...23)
        case "daily": break
        case "weekly": event.weekdays = [1]
        case "monthly": event.days = [1]
        case "yearly", "annually":
            event.months = [1]
            event.days = [1]
        default: return nil
        }
        return event
    }

    private static func sorted(_ set: Set<Int>?, _ range: ClosedRange<Int>) -> [Int] {
        (set ?? Set(range)).sorted()
    }

    /// `Mon`, `Mon,Wed`, `Mon..Fri`.
    private static func weekdays(_ word: String) throws -> Set<Int> {
        var set: Set<Int> = []
        for item in word.split(separator: ",", omittingEmptySubsequences: false) {
            let ends = item.components(separatedBy: "..")
            guard ends.count <= 2 else { throw Problem("'\(item)' is not a weekday range") }
            let numbers = try ends.map { name -> Int in
                let lower = name.lowercased()
                guard lower.count >= 3,
                    let index = weekdayNames.firstIndex(where: {
                        $0 == lower || ($0.hasPrefix(lower) && lower.count == 3)
                    })
                else { throw Problem("'\(name)' is not a weekday (Mon, Tue, ... Sun)") }
                return index + 1
            }
            let first = numbers[0]
            let last = numbers.last ?? first
            guard first <= last else {
                throw Problem("'\(item)' runs backwards (Mon..Sun is the week's order)")
            }
            set.formUnion(first...last)
        }
        return set
    }

    /// `*` (nil: any), `5`, `1..5`, `1,3`, `0/15`, `*/15`.
    private static func values(_ text: String, _ range: ClosedRange<Int>, _ unit: String) throws
        -> Set<Int>?
    {
        if text == "*" { return nil }
        var set: Set<Int> = []
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            func number(_ part: Substring) throws -> Int {
                guard !part.isEmpty, part.utf8.count <= 4, part.allSatisfy(\.isASCII),
                    let value = Int(part), range.contains(value)
                else {
                    throw Problem(
                        "'\(part)' is not a valid \(unit) (\(range.lowerBound)-\(range.upperBound))"
                    )
                }
                return value
            }
            let halves = item.split(separator: "/", omittingEmptySubsequences: false)
            guard halves.count <= 2 else { throw Problem("'\(item)' has two '/'") }
            if halves.count == 2 {
                let start = halves[0] == "*" ? range.lowerBound : try number(halves[0])
                guard let step = Int(halves[1]), step >= 1, step <= range.upperBound else {
                    throw Problem("'\(halves[1])' is not a step of \(unit)s")
                }
                set.formUnion(stride(from: start, through: range.upperBound, by: step))
                continue
            }
            let ends = item.components(separatedBy: "..")
            guard ends.count <= 2 else { throw Problem("'\(item)' is not a \(unit) range") }
            let first = try number(Substring(ends[0]))
            let last = ends.count == 2 ? try number(Substring(ends[1])) : first
            guard first <= last else { throw Problem("'\(item)' runs backwards") }
            set.formUnion(first...last)
        }
        return set
    }

    /// The first time after `date` (strictly) that matches, in `calendar`'s time zone; nil when
    /// none comes within `searchDays` days (`2020-02-30`, a year gone by).
    public func next(after date: Date, calendar: Calendar = .current) -> Date? {
        var day = calendar.startOfDay(for: date)
        for _ in 0..<Self.searchDays {
            let parts = calendar.dateComponents([.year, .month, .day, .weekday], from: day)
            // Calendar's weekday: 1 = Sunday ... 7 = Saturday; ours: 1 = Monday ... 7 = Sunday.
            let weekday = ((parts.weekday ?? 1) + 5) % 7 + 1
            if weekdays?.contains(weekday) ?? true, years?.contains(parts.year ?? 0) ?? true,
                months?.contains(parts.month ?? 0) ?? true, days?.contains(parts.day ?? 0) ?? true
            {
                for hour in hours {
                    for minute in minutes {
                        for second in seconds {
                            var wanted = parts
                            wanted.weekday = nil
                            wanted.hour = hour
                            wanted.minute = minute
                            wanted.second = second
                            if let time = calendar.date(from: wanted), time > date { return time }
                        }
                    }
                }
            }
            guard let following = calendar.date(byAdding: .day, value: 1, to: day) else {
                return nil
            }
            day = following
        }
        return nil
    }
}
