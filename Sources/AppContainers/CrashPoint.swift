import Glibc

/// Named points in the install, upgrade and uninstall sequences where the crash tests kill the
/// process (`APPD_CRASH_AT=install.published appd install ...`), to prove that a SIGKILL at each
/// step leaves either the old state or the new one. Anyone who can set a root process's
/// environment can already do worse, so the hook costs no security.
enum CrashPoint {
    private static let target: String? = getenv("APPD_CRASH_AT").map { String(cString: $0) }

    static func reach(_ name: String) {
        if target == name { kill(getpid(), SIGKILL) }
    }
}
