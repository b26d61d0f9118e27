import AppdAPI
import Foundation
import TestSupport
import Testing

/// appctl prints without Foundation's formatters (they bring ICU into it); what it prints must
/// stay byte for byte what they printed. Each helper against the Foundation API it replaces.
@Suite("TextFormatting matches Foundation's formatters")
struct TextFormattingTests {
    @Test("dates print as ISO8601DateFormatter printed them, with and without milliseconds")
    func dates() {
        let plain = ISO8601DateFormatter()
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var generator = SeededGenerator(seed: 15)
        var samples: [Double] = [
            0, 1_700_000_000, 1_700_000_000.999, 1_700_000_000.0005, -1, 253_402_300_799,
            -12_212_553_600, 1_700_000_000.9996, 1_700_000_059.9995,
        ]
        for _ in 0..<5000 {
            samples.append(Double.random(in: 0..<4_102_444_800, using: &generator))
        }
        for seconds in samples {
            let date = Date(timeIntervalSince1970: seconds)
            #expect(TextFormatting.iso8601(date) == plain.string(from: date), "\(seconds)")
            #expect(TextFormatting.rfc3339(date) == fractional.string(from: date), "\(seconds)")
        }
    }

    @Test("the API's dates read by arithmetic are the dates the ISO 8601 format style reads")
    func readDates() {
        var generator = SeededGenerator(seed: 15)
        var samples: [String] = [
            "1970-01-01T00:00:00Z", "1970-01-01T00:00:00.000Z", "2000-02-29T23:59:59.999Z",
            "2026-11-24T10:00:00.5Z", "2026-11-24T10:00:00.123456789Z", "9999-12-31T23:59:59.999Z",
            "2100-03-01T00:00:00.001Z", "2024-02-29T12:34:56.789Z",
        ]
        for _ in 0..<5000 {
            let date = Date(
                timeIntervalSince1970: Double.random(in: 0..<4_102_444_800, using: &generator))
            samples.append(TextFormatting.rfc3339(date))
            samples.append(TextFormatting.iso8601(date))
        }
        let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        let plainStyle = Date.ISO8601FormatStyle()
        for text in samples {
            let expected = (try? style.parse(text)) ?? (try? plainStyle.parse(text))
            #expect(APICoding.utcDate(text) == expected, "\(text)")
        }
        // Not the encoder's form: left to the format style.
        for text in [
            "2026-11-24T10:00:00+01:00", "2026-02-30T10:00:00Z", "2026-11-24 10:00:00Z",
            "2026-11-24T24:00:00Z",
            "2026-11-24T10:00:60Z", "2026-11-24T10:00:00.Z", "2026-11-24T10:00:00.1234567890Z",
            "1969-12-31T23:59:59Z",
            "2026-1-24T10:00:00Z", "2026-11-24T10:00:0aZ", "",
        ] {
            #expect(APICoding.utcDate(text) == nil, "\(text)")
        }
    }

    @Test(
        "--since's RFC 3339 times parse as ISO8601DateFormatter parsed them",
        arguments: [
            "2026-11-24T10:00:00Z", "2026-11-24T10:00:00.5+01:00", "2026-11-24T10:00:00.123Z",
            "2026-11-24T10:00:00+05:30", "2026-11-24T10:00:00-08:00", "1970-01-01T00:00:00Z",
            "2026-11-24", "2026-11-24 10:00:00Z", "10:00:00Z", "yesterday", "",
            "2026-13-01T00:00:00Z",
            "2026-11-24T10:00:00", "2026-11-24T25:00:00Z", "2026-11-24T10:00:00.123456789Z",
            "2026-02-30T00:00:00Z", "2024-02-29T00:00:00Z", "2026-11-24T10:00:60Z",
            "2026-11-24t10:00:00z",
            "2026-11-24T24:00:00Z", "2026-11-24T10:00:00+14:00", "2026-11-24T10:00:00+0100",
            "2026-11-24T10:00:00.Z", "1583-01-01T00:00:00Z", "2026-11-24T10:00:00Zx",
            "2026-01-32T00:00:00Z", "2026-11-24T24:30:00Z", "2026-11-24T10:60:00Z",
            "2026-04-31T00:00:00Z", "2026-11-24T10:00:00+01", "2026-11-24T10:00:00+01:",
            "2026-11-24T10:00:00+1", "2026-11-24T10:00:00+01:3", "2026-11-24T10:00:00+",
            "2026-11-24T10:00:00.5x", "2026-11-24T10:00:00+01:00:00", "2026-11-24T10:00:00+0130",
            "9999-12-31T23:59:59.999Z", "2026-11-24T10:00Z",
            "2026-11-24T10:00:00.999999Z", " 2026-11-24T10:00:00Z", "2026-11-24T10:00:00Z ",
        ])
    func parsing(text: String) {
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let expected = fractional.date(from: text) ?? ISO8601DateFormatter().date(from: text)
        let parsed = TextFormatting.parseRFC3339(text)
        #expect(parsed?.timeIntervalSince1970 == expected?.timeIntervalSince1970, "\(text)")
    }

    /// Where ICU read a malformed zone offset as some other offset (`+24:00` as +02:00, `-00:61`
    /// as +00:00), appctl says the time is not RFC 3339 instead of using a time nobody meant.
    @Test(
        "malformed zone offsets are refused, not read as another offset",
        arguments: ["2026-11-24T10:00:00+24:00", "2026-11-24T10:00:00-00:61"])
    func malformedOffsets(text: String) {
        #expect(TextFormatting.parseRFC3339(text) == nil)
    }

    /// ICU read `+1:30` as +13:00; it is +01:30.
    @Test("a one-digit offset hour is that hour")
    func oneDigitOffset() {
        #expect(
            TextFormatting.parseRFC3339("2026-11-24T10:00:00+1:30")
                == TextFormatting.parseRFC3339("2026-11-24T08:30:00Z"))
    }

    @Test("sizes print as ByteCountFormatter's .file style printed them")
    func sizes() {
        var generator = SeededGenerator(seed: 42)
        var samples: [Int64] = [
            0, 1, -1, 2, 999, 1000, 1499, 1500, 2500, 999_499, 999_500, 999_999, 1_000_000,
            1_049_999, 1_050_000, 1_150_000, 1_250_000, 999_949_999, 999_950_000, 999_999_999,
            1_000_000_000, 1_005_000_000, 1_015_000_000, 1_234_567_890_123, .max, .min + 1,
            -1_500_000,
            -1_005_000_000,
        ]
        for _ in 0..<5000 {
            let magnitude = Int64.random(in: 0...18, using: &generator)
            var limit: Int64 = 1
            for _ in 0..<magnitude { limit *= 10 }
            samples.append(Int64.random(in: 0...limit, using: &generator))
        }
        for count in samples {
            #expect(
                TextFormatting.byteCount(count)
                    == ByteCountFormatter.string(fromByteCount: count, countStyle: .file),
                "\(count)")
        }
    }

    @Test("numbers print as String(format:) printed them")
    func numbers() {
        var generator = SeededGenerator(seed: 7)
        for _ in 0..<2000 {
            let value = Double.random(in: -1000...1000, using: &generator)
            #expect(TextFormatting.printf("%.1f", value) == String(format: "%.1f", value))
            #expect(TextFormatting.printf("%g", value) == String(format: "%g", value))
            let whole = Int.random(in: 0...99, using: &generator)
            #expect(TextFormatting.printf("%02ldm", whole) == String(format: "%02dm", whole))
        }
        #expect(TextFormatting.printf("%.1f", 0.05) == String(format: "%.1f", 0.05))
        #expect(TextFormatting.printf("%g", 30.0) == "30")
    }

    @Test(
        "padding and trimming as NSString did them",
        arguments: [
            "", "a", "exited", "terminated", "installed  ", "  x\t", "naïve", "日本語", "e\u{301}",
            "😀😀", "\u{3000}wide\u{00A0}",
        ])
    func padding(text: String) {
        for length in [0, 1, 3, 8, 11] {
            #expect(
                text.padded(toLength: length)
                    == text.padding(toLength: length, withPad: " ", startingAt: 0))
        }
        #expect(text.trimmingWhitespace() == text.trimmingCharacters(in: .whitespaces))
    }
}
