import AppdBase
import Foundation
import Glibc

/// Picks a uid for a new app (`[Users] UIDRange`), or a gid for a new application group
/// (`GroupRange`): the lowest number of the range that no app or group holds and that the host
/// does not use for anything else (an account, a group, or a subordinate id range handed to a
/// user for their own containers). An app's gid is the same number as its uid.
///
/// Allocations live in the registry (the apps' `uid`, the groups' `gid`), so they are stable
/// across upgrades and released only when the row goes: a failed install consumes nothing.
struct UIDAllocator {
    let range: ClosedRange<UInt32>
    var etc = "/etc"

    /// `exhausted`: the error when every number is taken, saying what holds them.
    func allocate(excluding taken: Set<UInt32>, exhausted: @autoclosure () -> AppdError) throws
        -> UInt32
    {
        let reserved = subordinateRanges()
        for candidate in range where !taken.contains(candidate) {
            if reserved.contains(where: { $0.contains(candidate) }) { continue }
            if getpwuid(candidate) != nil || getgrgid(candidate) != nil { continue }
            return candidate
        }
        throw exhausted()
    }

    /// How many of `ids` lie in the range.
    func held(_ ids: some Collection<UInt32>) -> Int { ids.count { range.contains($0) } }

    /// The ranges of /etc/subuid and /etc/subgid (`name:start:count` lines).
    func subordinateRanges() -> [ClosedRange<UInt32>] {
        var ranges: [ClosedRange<UInt32>] = []
        for file in ["subuid", "subgid"] {
            guard let text = try? String(contentsOfFile: "\(etc)/\(file)", encoding: .utf8) else {
                continue
            }
            for line in text.split(separator: "\n") {
                let fields = line.split(separator: ":")
                guard fields.count == 3, let start = UInt32(fields[1]),
                    let count = UInt32(fields[2]),
                    count > 0, start <= UInt32.max - (count - 1)
                else { continue }
                ranges.append(start...(start + count - 1))
            }
        }
        return ranges
    }
}
