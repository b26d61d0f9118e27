import CLinux
import Foundation
import Glibc

/// Whether this kernel reports sandbox denials to appd, and what is missing where it does not
/// (`appd doctor`, the daemon at start).
public enum KernelDenialReporting {
    public struct Status: Sendable, Codable, Equatable {
        public init() {}

        /// Each a sentence naming what is missing and what that means; empty: everything is
        /// reported.
        public var problems: [String] = []
        /// Facts worth showing (audit's mode, lost records).
        public var notes: [String] = []
    }

    /// Audit's failure mode is panic (`auditctl -f 2`): a lost record panics the host. Then no
    /// app's denials may be audited (an app could flood them). False where audit cannot be asked.
    public static func auditFailurePanics() -> Bool {
        var status = appd_audit_status()
        return appd_audit_get_status(&status) == 0 && status.failure == 2
    }

    /// With `enableAudit`, turns audit on when it is off (the kernel drops Landlock's records
    /// while it is off); the daemon does, doctor only looks.
    public static func check(enableAudit: Bool = false) -> Status {
        var result = Status()
        var status = appd_audit_status()
        if appd_audit_get_status(&status) != 0 {
            let error = errno
            let cause =
                error == EPERM
                ? "appd may not ask audit (EPERM): it needs CAP_AUDIT_CONTROL and CAP_AUDIT_READ (run as root)"
                : "no audit (\(String(cString: strerror(error)))): hint: a kernel with CONFIG_AUDIT, in the host's"
                    + " network and user namespace (audit refuses containers)"
            result.problems.append(
                cause
                    + "; the kernel's Landlock and seccomp denials cannot be reported, only appd's own refusals"
            )
            return result
        }
        if status.enabled == 0 && enableAudit {
            if appd_audit_set_enabled(1) == 0 {
                status.enabled = 1
                result.notes.append("audit was off: appd turned it on (auditctl -e 1)")
            }
        }
        if status.enabled == 0 {
            result.problems.append(
                "audit is off (auditctl -e 0): Landlock denials are not reported (seccomp's still are);"
                    + " appd serve turns it on at start")
        }
        if status.failure == 2 {
            result.problems.append(
                "audit failure mode is panic (auditctl -f 2): appd does not ask the kernel to audit apps'"
                    + " denials, since an app flooding them past the audit backlog (\(status.backlog_limit))"
                    + " would panic the host; only appd's own refusals are logged; hint: auditctl -f 1"
            )
        }
        result.notes.append(
            "audit: \(status.pid == 0 ? "no audit daemon" : "auditd pid \(status.pid)"), backlog limit"
                + " \(status.backlog_limit), \(status.lost) record(s) lost since boot")
        let abi = appd_landlock_abi_version()
        if abi < 7 {
            result.problems.append(
                "Landlock ABI \(max(abi, 0)) < 7: the kernel does not report Landlock denials (needs Linux 6.15);"
                    + " seccomp's and appd's are reported")
        }
        let logged =
            (try? String(contentsOfFile: "/proc/sys/kernel/seccomp/actions_logged", encoding: .utf8))
            ?? ""
        if !logged.split(whereSeparator: { $0 == " " || $0 == "\n" }).contains("errno") {
            result.problems.append(
                "kernel.seccomp.actions_logged lacks errno: seccomp's refusals are not reported;"
                    + " hint: sysctl kernel.seccomp.actions_logged='\(logged.trimmingCharacters(in: .whitespacesAndNewlines)) errno'"
            )
        }
        return result
    }
}
