import Glibc

/// The locale apps get as `LANG` (docs/lifecycle.md, "Preferences"): the host's, as the daemon
/// was started with it (`LC_ALL`, else `LANG`; systemd hands services `/etc/locale.conf`'s),
/// when the host's C library has that locale, else `C.UTF-8`. An app then reads its language
/// from it as on the host (AppRuntime's AppleLanguages and AppleLocale, its `.lproj` folders).
public enum HostLocale {
    /// The fallback every glibc since 2.35 carries built in.
    public static let fallback = "C.UTF-8"

    /// For this process's environment, looked up once.
    public static let current = pick(
        environment: [
            "LC_ALL": getenv("LC_ALL").map { String(cString: $0) },
            "LANG": getenv("LANG").map { String(cString: $0) },
        ].compactMapValues { $0 }, exists: exists)

    /// The first of `LC_ALL`, `LANG` that is set, not `C`/`POSIX`, well-formed (letters,
    /// digits, `_ . - @`, at most 64 bytes) and `exists`; else `fallback`.
    public static func pick(environment: [String: String], exists: (String) -> Bool) -> String {
        for name in ["LC_ALL", "LANG"] {
            guard let value = environment[name], !value.isEmpty else { continue }
            guard value.utf8.count <= 64,
                value.utf8.allSatisfy({ byte in
                    (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A)
                        || [0x5F, 0x2E, 0x2D, 0x40].contains(byte)
                }),
                !["C", "POSIX"].contains(value)
            else { return fallback }
            return exists(value) ? value : fallback
        }
        return fallback
    }

    /// Whether the C library can load `name` (newlocale reads the locale archive). Its
    /// character set and messages are asked for: LC_ALL_MASK is a macro Swift does not import,
    /// and a locale that has those two has the rest.
    public static func exists(_ name: String) -> Bool {
        let mask = Int32(1 << LC_CTYPE) | Int32(1 << LC_MESSAGES)
        guard let locale = newlocale(mask, name, nil) else { return false }
        freelocale(locale)
        return true
    }
}
