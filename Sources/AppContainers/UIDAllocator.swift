import AppBundle
import Foundation
import Glibc

/// Picks a uid for a new app: the lowest number of the configured range that no app holds and
/// that the host does not use for anything else (an account, a group, or a subordinate id range
/// handed to a user for their own containers). The app's gid is the same number.
///
/// Allocations live in the registry's `uid` column (unique), so they are stable across upgrades
/// and released only when the row goes: a failed install consumes nothing.
struct UIDAllocator {
    let range: ClosedRange<UInt32>
    var etc = "/etc"

    func allocate(excluding taken: Set<UInt32>) throws -> UInt32 {
        let reserved = subordinateRanges()
        for candidate in range where !taken.contains(candidate) {
            if reserved.contains(where: { $0.contains(candidate) }) { continue }
            if getpwuid(candidate) != nil || getgrgid(candidate) != nil { continue }
            return candidate
        }
        throw AppdError(
            .conflict,
            "no free uid left in the range \(range.lowerBound)-\(range.upperBound) (\(taken.count) apps installed)",
            hint: "widen [Users] UIDRange= in appd.conf")
    }

    /// The ranges of /etc/subuid and /etc/subgid (`name:start:count` lines).
    func subordinateRanges() -> [ClosedRange<UInt32>] {
        var ranges: [ClosedRange<UInt32>] = []
        for file in ["subuid", "subgid"] {
            guard let text = try? String(contentsOfFile: "\(etc)/\(file)", encoding: .utf8) else {
                continue
            }
            for line in text.split(separator: "\n") {
                let fields = line.split(separator: ":")
                guard fields.count == 3, let start = UInt32(fields[1]), let count = UInt32(fields[2]),
                    count > 0, start <= UInt32.max - (count - 1)
                else { continue }
                ranges.append(start...(start + count - 1))
            }
        }
        return ranges
    }
}
