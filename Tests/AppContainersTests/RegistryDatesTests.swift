import Foundation
import GRDB
import Testing

@testable import AppContainers

/// The registry's dates are written and read without DateFormatter (ICU), in the text GRDB's
/// default writes: old registries read the same, new ones stay readable by GRDB's own parser.
@Suite("registry dates")
struct RegistryDatesTests {
    static let samples: [Date] = [
        Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_795_000_000.123),
        Date(timeIntervalSince1970: 1_795_000_000.9999), Date(timeIntervalSince1970: -86_400.5),
        Date(timeIntervalSince1970: 951_782_400.25),  // 2000-02-29
        Date(timeIntervalSince1970: 4_102_444_799.999),  // 2099-12-31 23:59:59.999
    ]

    @Test("the same text GRDB's default (DateFormatter) writes")
    func sameTextAsGRDB() {
        for date in Self.samples {
            let grdb = String.fromDatabaseValue(date.databaseValue)
            #expect(RegistryDates.text(for: date) == grdb, "\(date.timeIntervalSince1970)")
        }
    }

    @Test("read back to the millisecond, and what GRDB's parser reads from the same text")
    func readBack() throws {
        for date in Self.samples {
            let text = RegistryDates.text(for: date)
            let read = try #require(RegistryDates.date(from: text))
            let milliseconds = (date.timeIntervalSince1970 * 1000).rounded() / 1000
            #expect(abs(read.timeIntervalSince1970 - milliseconds) < 0.000_5, "\(text)")
            let grdb = try #require(Date.fromDatabaseValue(text.databaseValue))
            #expect(
                abs(read.timeIntervalSince1970 - grdb.timeIntervalSince1970) < 0.000_5, "\(text)")
        }
        #expect(
            RegistryDates.date(from: "2026-11-23 14:00:00")
                == Date(timeIntervalSince1970: 1_795_442_400))
    }

    @Test("text that is not such a date is nil, not a wrong date")
    func refusesOtherText() {
        for text in [
            "", "2026-11-23", "2026-13-01 00:00:00", "2026-11-23T14:00:00", "2026-11-23 14:00:00.",
            "2026-11-23 14:00:00.12a", "x026-11-23 14:00:00",
        ] {
            #expect(RegistryDates.date(from: text) == nil, "\(text)")
        }
    }
}
