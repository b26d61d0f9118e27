import Foundation
import Glibc

/// What /proc/PID/status says of one of the launcher's helpers (the outer launcher, the output
/// relay, the sandbox's PID 1): its capability sets, seccomp mode and no_new_privs
/// (docs/launcher-protocol.md, "The helpers").
public struct HelperStatus: CustomStringConvertible {
    public let pid: pid_t
    /// `Name: value` lines, the value with its tabs.
    public let fields: [String: String]

    public init(_ pid: pid_t) {
        self.pid = pid
        var fields: [String: String] = [:]
        for line in readKernelFile("/proc/\(pid)/status").split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { continue }
            fields[String(parts[0])] = parts[1].trimmingCharacters(in: .whitespaces)
        }
        self.fields = fields
    }

    /// The real, effective, saved and filesystem uids.
    public var uids: [String] {
        (fields["Uid"] ?? "").split(whereSeparator: \.isWhitespace).map(String.init)
    }

    /// No capability in any set (they are the host user namespace's: a helper never has one of
    /// its own), a seccomp filter (mode 2) and no_new_privs.
    public var holdsNothing: Bool {
        ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"].allSatisfy {
            fields[$0] == "0000000000000000"
        } && fields["Seccomp"] == "2" && fields["NoNewPrivs"] == "1"
    }

    public var description: String {
        let shown = ["Name", "Uid", "CapPrm", "CapEff", "CapBnd", "NoNewPrivs", "Seccomp"]
        return "pid \(pid): " + shown.map { "\($0) \(fields[$0] ?? "?")" }.joined(separator: ", ")
    }

    /// `pid`'s children (its main thread's).
    public static func children(of pid: pid_t) -> [pid_t] {
        readKernelFile("/proc/\(pid)/task/\(pid)/children").split(separator: " ")
            .compactMap { pid_t($0) }
    }
}
