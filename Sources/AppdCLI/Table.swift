import AppdAPI
import PrintableText

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// Columns padded to their widest cell, two spaces apart, as `appd list` has always printed.
public enum Table {
    /// Each cell is shown by the one rule (`Printable`): cells hold names and paths apps chose.
    public static func print(_ cells: [[String]]) {
        let rows = cells.map { $0.map(\.printable) }
        let columns = rows.map(\.count).max() ?? 0
        let widths = (0..<columns).map { column in
            rows.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0
        }
        for row in rows {
            let line = zip(row, widths).map {
                $0.padded(toLength: $1)
            }
            .joined(separator: "  ")
            Swift.print(line.trimmingWhitespace())
        }
    }

    /// `42s`, `3m05s`, `2h07m`, `3d04h`: two units at most, which is what a glance at `ps` needs.
    public static func duration(_ seconds: TimeInterval) -> String {
        let total = max(0, Int(seconds.rounded(.down)))
        let (days, hours, minutes, secs) = (
            total / 86400, total / 3600 % 24, total / 60 % 60, total % 60
        )
        if days > 0 { return "\(days)d" + TextFormatting.printf("%02ldh", hours) }
        if hours > 0 { return "\(hours)h" + TextFormatting.printf("%02ldm", minutes) }
        if minutes > 0 { return "\(minutes)m" + TextFormatting.printf("%02lds", secs) }
        return "\(secs)s"
    }
}
