import Glibc

/// Gives the instance an audit session of its own: writing the login uid (the app's uid) makes
/// the kernel assign a new session id, which every process of the sandbox inherits and every
/// audit record of theirs carries (`ses=`). The daemon's denial log maps a record to its
/// instance by it even when the process is gone, and never takes another daemon's app (or any
/// other process of the same uid) for one of its own (docs/denials.md). Best effort: without
/// CAP_AUDIT_CONTROL, or under a login uid that is already set and immutable, the session
/// stays the daemon's and the log falls back to cgroups.
enum AuditSession {
    static func begin(uid: uid_t) {
        let fd = open("/proc/self/loginuid", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let text = Array(String(uid).utf8)
        _ = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}
