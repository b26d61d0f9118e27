import AppdAPI
import ArgumentParser

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// `--since`: an RFC 3339 time (`2026-11-24T10:00:00Z`, `2026-11-24T10:00:00.5+01:00`), or a
/// duration ago as journalctl and docker take it (`90s`, `10m`, `2h`, `1d`, `1h30m`). Relative
/// times are resolved here, with this machine's clock, and sent to the daemon as RFC 3339.
struct SinceArgument: ExpressibleByArgument {
    let date: Date

    init?(argument: String) {
        guard let date = Self.parse(argument, now: Date()) else { return nil }
        self.date = date
    }

    static func parse(_ text: String, now: Date) -> Date? {
        if let seconds = duration(text) { return now.addingTimeInterval(-seconds) }
        return TextFormatting.parseRFC3339(text)
    }

    /// `1h30m` → 5400; nil unless every part is a number and one of s, m, h, d (and the total is
    /// at most ten years: nothing is older).
    static func duration(_ text: String) -> Double? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var total = 0.0
        var number = ""
        guard !text.isEmpty else { return nil }
        for character in text {
            if character.isASCII, character.isNumber || character == "." {
                number.append(character)
            } else if let unit = units[character], let value = Double(number), value.isFinite {
                total += value * unit
                number = ""
            } else {
                return nil
            }
        }
        guard number.isEmpty, total <= 10 * 365 * 86400 else { return nil }
        return total
    }

    /// What the API takes.
    var rfc3339: String {
        TextFormatting.rfc3339(date)
    }

    static let help = ArgumentHelp(
        "Only what came at or after TIME: RFC 3339 (2026-11-24T10:00:00Z) or a time ago (90s, 10m, 2h, 1d, 1h30m).",
        valueName: "TIME")
}
