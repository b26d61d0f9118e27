import Foundation
import Testing

@testable import AppdConfig

/// `StartCalendarInterval=`'s subset of systemd's calendar events: what it reads, what it
/// refuses (naming the key and the part), and the next time of each.
@Suite("StartCalendarInterval: the calendar events it reads")
struct CalendarIntervalTests {
    /// UTC, so that the expectations hold on any host.
    static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        return calendar
    }()
    /// Wednesday 2026-12-02 10:20:30 UTC.
    static let wednesday = Date(timeIntervalSince1970: 1_796_206_830)

    static func at(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        return formatter.date(from: text)
    }

    @Test(
        "each accepted form gives the next time after a Wednesday 10:20:30 UTC",
        arguments: [
            ("daily", "2026-12-03T00:00:00Z"),
            ("hourly", "2026-12-02T11:00:00Z"),
            ("minutely", "2026-12-02T10:21:00Z"),
            ("weekly", "2026-12-07T00:00:00Z"),
            ("monthly", "2027-01-01T00:00:00Z"),
            ("yearly", "2027-01-01T00:00:00Z"),
            ("*-*-* 03:30", "2026-12-03T03:30:00Z"),
            ("10:45", "2026-12-02T10:45:00Z"),
            ("Mon..Fri 09:00", "2026-12-03T09:00:00Z"),
            ("Sat,sunday 09:00", "2026-12-05T09:00:00Z"),
            ("*:0/15", "2026-12-02T10:30:00Z"),
            ("12-25 08:00:30", "2026-12-25T08:00:30Z"),
            ("2027-02-01 00:00", "2027-02-01T00:00:00Z"),
            ("*-*-1,15 12:00", "2026-12-15T12:00:00Z"),
            ("10..11:20:31", "2026-12-02T10:20:31Z"),
        ])
    func accepted(text: String, expected: String) throws {
        let event = try CalendarInterval.parse(text).get()
        #expect(event.next(after: Self.wednesday, calendar: Self.utc) == Self.at(expected))
    }

    @Test(
        "anything else is refused with what is wrong",
        arguments: [
            ("", "empty"), ("sometimes", "'sometimes' is not a weekday"),
            ("Fry 09:00", "'Fry' is not a weekday"),
            ("Fri..Mon 09:00", "runs backwards"), ("25:00", "'25' is not a valid hour"),
            ("09:60", "'60' is not a valid minute"), ("*-13-01 00:00", "'13' is not a valid month"),
            ("2026-1 00:00", "'2026' is not a valid month"), ("09:00 extra", "after the time"),
            ("9", "not a time"), ("*:*/0", "not a step"), ("Mon", "no time"),
            ("1-2-3-4 00:00", "not a date"), ("-1:00", "'-1' is not a valid hour"),
        ])
    func refused(text: String, reason: String) {
        guard case .failure(let problem) = CalendarInterval.parse(text) else {
            Issue.record("'\(text)' was accepted")
            return
        }
        #expect(problem.description.contains(reason), "\(problem)")
    }

    @Test("a date that never comes has no next time (2026-02-30)")
    func never() throws {
        let event = try CalendarInterval.parse("*-02-30 00:00").get()
        #expect(event.next(after: Self.wednesday, calendar: Self.utc) == nil)
    }

    @Test("appd.conf names the key and the app of a bad StartCalendarInterval=")
    func namedInConfig() {
        #expect(throws: (any Error).self) {
            try AppdConfiguration.parse(
                "[App com.example.report]\nStartCalendarInterval=Mon..Fry 09:00\n",
                file: "appd.conf")
        }
        do {
            _ = try AppdConfiguration.parse(
                "[App com.example.report]\nStartCalendarInterval=Mon..Fry 09:00\n",
                file: "appd.conf")
        } catch {
            let text = "\(error)"
            #expect(text.contains("StartCalendarInterval=Mon..Fry 09:00"), "\(text)")
            #expect(text.contains("'Fry' is not a weekday"), "\(text)")
        }
    }
}
