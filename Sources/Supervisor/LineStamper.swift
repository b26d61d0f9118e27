import Foundation
import Glibc

/// Puts the time each line was read in front of it (`2026-11-24T10:00:00.123456Z `), as the
/// bytes go by: no line is held whole, however long.
struct LineStamper {
    let timestamps: Bool
    var index: LogTimeIndex?
    var atLineStart = true

    init(timestamps: Bool) { self.timestamps = timestamps }

    /// `bytes` read from `offset` of the file, with a time before each line that starts in it.
    mutating func stamp(_ bytes: ArraySlice<UInt8>, at offset: Int64) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 64)
        var start = bytes.startIndex
        while start < bytes.endIndex {
            if atLineStart {
                let time = index?.time(at: offset + Int64(start - bytes.startIndex))
                out += Self.format(time)
                atLineStart = false
            }
            if let newline = bytes[start...].firstIndex(of: 0x0A) {
                out += bytes[start...newline]
                start = newline + 1
                atLineStart = true
            } else {
                out += bytes[start...]
                start = bytes.endIndex
            }
        }
        return out
    }

    /// RFC 3339 in UTC with microseconds and a space; dashes of the same width when the time is
    /// unknown (a log written before the relay kept times).
    static func format(_ microseconds: Int64?) -> [UInt8] {
        guard let microseconds else { return Array("-".utf8) + [UInt8](repeating: 0x20, count: 27) }
        var seconds = time_t(microseconds.dividedReportingOverflow(by: 1_000_000).partialValue)
        var fraction = microseconds % 1_000_000
        if fraction < 0 {
            fraction += 1_000_000
            seconds -= 1
        }
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return format(nil) }
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        let text =
            "\(pad(Int(parts.tm_year) + 1900, 4))-\(pad(Int(parts.tm_mon) + 1, 2))-\(pad(Int(parts.tm_mday), 2))T"
            + "\(pad(Int(parts.tm_hour), 2)):\(pad(Int(parts.tm_min), 2)):\(pad(Int(parts.tm_sec), 2))."
            + "\(pad(Int(fraction), 6))Z "
        return Array(text.utf8)
    }
}
