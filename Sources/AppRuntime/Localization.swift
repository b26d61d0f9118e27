/// Which `.lproj` folders to look in, best first.
///
/// The user's languages come from the app's environment, the way gettext reads it: `LANGUAGE`
/// (a colon-separated priority list) first, else the first set of `LC_ALL`, `LC_MESSAGES`,
/// `LANG`. A POSIX locale (`de_DE.UTF-8@euro`) becomes a language tag (`de-DE`) and then its
/// shorter forms (`de`); `C` and `POSIX` mean no preference. Unlike gettext, `LANGUAGE` counts
/// even when the locale is `C`: appd's sandbox sets `LANG=C.UTF-8`, and an admin who sets
/// `LANGUAGE` for an app means it.
///
/// After the user's languages come the bundle's `CFBundleDevelopmentRegion`, then `Base`, then
/// `en`; only folders the bundle has are kept.
enum Localization {
    static func preferredLanguages(environment: [String: String]) -> [String] {
        var entries: [String] = []
        if let list = environment["LANGUAGE"], !list.isEmpty {
            entries = list.split(separator: ":").map(String.init)
        } else if let locale = ["LC_ALL", "LC_MESSAGES", "LANG"].lazy
            .compactMap({ environment[$0] }).first(where: { !$0.isEmpty })
        {
            entries = [locale]
        }
        var languages: [String] = []
        for entry in entries {
            guard let tag = tag(fromLocale: entry) else { continue }
            for form in shorterForms(of: tag) where !languages.contains(form) {
                languages.append(form)
            }
        }
        return languages
    }

    /// `de_DE.UTF-8@euro` → `de-DE`; nil for the POSIX locale.
    static func tag(fromLocale locale: String) -> String? {
        var name = Substring(locale)
        if let at = name.firstIndex(of: "@") { name = name[..<at] }
        if let dot = name.firstIndex(of: ".") { name = name[..<dot] }
        guard !name.isEmpty, name != "C", name != "POSIX" else { return nil }
        return name.replacingOccurrences(of: "_", with: "-")
    }

    /// `zh-Hans-CN` → `zh-Hans-CN`, `zh-Hans`, `zh`.
    static func shorterForms(of tag: String) -> [String] {
        let parts = tag.split(separator: "-")
        return (1...max(parts.count, 1)).reversed().map { parts.prefix($0).joined(separator: "-") }
    }

    /// The lookup order over the `.lproj` names the bundle has (`available`, without `.lproj`).
    static func resolve(preferred: [String], available: [String], developmentRegion: String?)
        -> [String]
    {
        var order: [String] = []
        func add(_ name: String) {
            if !order.contains(name) { order.append(name) }
        }
        for language in preferred {
            if let match = available.first(where: { key($0) == key(language) }) {
                add(match)
            } else if !language.contains("-") {
                // `de` wanted and only `de-AT.lproj` present: a regional variant beats English.
                available.filter { key($0).hasPrefix(key(language) + "-") }.sorted().forEach(add)
            }
        }
        for fallback in [developmentRegion, "Base", "en"].compactMap({ $0 }) {
            if let match = available.first(where: { key($0) == key(fallback) }) { add(match) }
        }
        return order
    }

    /// Compares names case-insensitively, `_` and `-` alike, and the old English names of
    /// `.lproj` folders (`English.lproj`) as their codes.
    private static func key(_ name: String) -> String {
        let lowered = name.lowercased().replacingOccurrences(of: "_", with: "-")
        return legacyNames[lowered] ?? lowered
    }

    private static let legacyNames = [
        "english": "en", "german": "de", "french": "fr", "spanish": "es", "italian": "it",
        "japanese": "ja", "dutch": "nl", "portuguese": "pt", "swedish": "sv", "danish": "da",
        "finnish": "fi", "norwegian": "no", "korean": "ko", "russian": "ru", "polish": "pl",
        "chinese": "zh",
    ]
}
