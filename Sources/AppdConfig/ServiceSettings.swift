/// How the admin runs one app as a service, launchd-style, in its `[App ID]` section
/// (docs/lifecycle.md, "Services"): started with appd, restarted when it ends, with stored
/// arguments and environment. Kept as the text the admin wrote, so that `appd override`
/// writes back exactly what it read.
public struct ServiceSettings: Sendable, Equatable {
    public enum KeepAlive: String, Sendable, CaseIterable {
        /// Never restarted (the default).
        case no
        /// Restarted whenever it ends without appd having asked it to (terminate, kill).
        case yes
        /// Restarted only when it failed: a code other than 0, a signal, or ended by the
        /// lifecycle (out of memory, jetsam, watchdog, lost).
        case onFailure = "on-failure"
    }

    /// The most words `Arguments=` and variables `Environment=` may hold, and bytes per value.
    public static let maxWords = 256
    public static let maxValueBytes = 4096

    /// Names the sandbox sets itself (SandboxPolicy.environment and the lifecycle channel):
    /// `Environment=` cannot replace them. Nor any `APPD_` name, nor the dynamic loader's
    /// `LD_` variables.
    public static let reservedNames: Set<String> = [
        "HOME", "CFFIXED_USER_HOME", "TMPDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME",
        "PATH", "USER", "LOGNAME",
    ]

    /// `RunAtLoad=yes`: launched when appd starts, unless an instance is running already.
    public var runAtLoad = false
    public var keepAlive = KeepAlive.no
    /// `Arguments=`: argv after the executable for appd's own launches (RunAtLoad, KeepAlive)
    /// and for a launch that names none. nil: not set.
    public var arguments: [String]? { argumentsSetting?.value }
    /// `Environment=NAME=value ...`: added to every launch's environment.
    public var environment: [Variable] { environmentSetting?.value ?? [] }
    /// `Arguments=` and `Environment=` as written (quoted words) and as read.
    var argumentsSetting: Written<[String]>?
    var environmentSetting: Written<[Variable]>?
    /// `StartInterval=SECONDS`: launched (or, suspended, woken) every so many seconds, as
    /// launchd's StartInterval. nil: not set.
    public var startInterval: Double?
    /// `StartCalendarInterval=`: launched (or woken) at these times (CalendarInterval's subset
    /// of systemd's calendar events), as a timer unit's OnCalendar=.
    public var startCalendar: CalendarInterval? { startCalendarSetting?.value }
    var startCalendarSetting: Written<CalendarInterval>?

    /// Whether appd starts it on a schedule (StartInterval or StartCalendarInterval).
    public var isScheduled: Bool { startInterval != nil || startCalendarSetting != nil }

    public typealias Variable = (name: String, value: String)

    /// A value as the admin wrote it, which `appd override` writes back unchanged, and as read.
    public struct Written<Value: Sendable>: Sendable {
        public var text: String
        public var value: Value
    }

    public init() {}

    public static func == (a: Self, b: Self) -> Bool {
        a.runAtLoad == b.runAtLoad && a.keepAlive == b.keepAlive
            && a.argumentsSetting?.text == b.argumentsSetting?.text
            && a.environmentSetting?.text == b.environmentSetting?.text
            && a.startInterval == b.startInterval
            && a.startCalendarSetting?.text == b.startCalendarSetting?.text
    }

    /// Whether any key is set: the app is run as a service by appd.
    public var isEmpty: Bool { self == ServiceSettings() }

    /// Splits `text` into words as a shell would for plain quoting: spaces separate words,
    /// `"..."` and `'...'` keep spaces, `\` escapes the next character (outside single quotes).
    /// No expansion of any kind. Bounded: at most `maxWords` words of `maxValueBytes` bytes.
    public static func words(_ text: String) -> Result<[String], WordProblem> {
        var words: [String] = []
        var current = ""
        var inWord = false
        var quote: Character?
        var escaped = false
        for character in text {
            if character.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                return .failure(WordProblem("a control character"))
            }
            if escaped {
                current.append(character)
                escaped = false
                continue
            }
            switch (quote, character) {
            case (nil, " "), (nil, "\t"):
                if inWord { words.append(current) }
                current = ""
                inWord = false
            case (nil, "\""), (nil, "'"):
                quote = character
                inWord = true
            case (let open?, _) where character == open:
                quote = nil
            case (nil, "\\"), ("\"", "\\"):
                escaped = true
                inWord = true
            default:
                current.append(character)
                inWord = true
            }
            if current.utf8.count > maxValueBytes {
                return .failure(WordProblem("a word over \(maxValueBytes) bytes"))
            }
            if words.count > maxWords {
                return .failure(WordProblem("more than \(maxWords) words"))
            }
        }
        if quote != nil { return .failure(WordProblem("a quote without its end")) }
        if escaped { return .failure(WordProblem("a \\ at the end")) }
        if inWord { words.append(current) }
        if words.count > maxWords { return .failure(WordProblem("more than \(maxWords) words")) }
        return .success(words)
    }

    public struct WordProblem: Error, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }

    /// `NAME=value` with a portable name the sandbox does not set itself.
    static func variable(_ word: String) -> Result<(name: String, value: String), WordProblem> {
        guard let equals = word.firstIndex(of: "=") else {
            return .failure(WordProblem("'\(word)' has no '='"))
        }
        let name = String(word[..<equals])
        let value = String(word[word.index(after: equals)...])
        let portable = name.utf8.enumerated().allSatisfy { index, byte in
            byte == 0x5F || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || (index > 0 && byte >= 0x30 && byte <= 0x39)
        }
        guard !name.isEmpty, portable else {
            return .failure(WordProblem("'\(name)' is not a variable name (letters, digits, _)"))
        }
        guard !reservedNames.contains(name), !name.hasPrefix("APPD_"), !name.hasPrefix("LD_") else {
            return .failure(WordProblem("\(name) is set by the sandbox and cannot be replaced"))
        }
        return .success((name, value))
    }
}
