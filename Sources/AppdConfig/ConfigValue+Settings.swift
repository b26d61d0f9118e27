import Glibc

/// The kinds of value only one or two keys take, each read once here.
extension ConfigValue where Value == ClosedRange<UInt32> {
    /// `FIRST-LAST`, above the system's ids.
    static func idRange(_ key: String) -> ConfigValue {
        ConfigValue(reading: { (text: String) throws(ConfigProblem) -> ClosedRange<UInt32> in
            let parts = text.split(separator: "-").map { UInt32($0.trimmingWhitespace()) }
            guard parts.count == 2, let low = parts[0], let high = parts[1], low <= high else {
                throw .notA("a range 'FIRST-LAST'")
            }
            guard low >= 1000 else {
                throw .says("\(key) starts at \(low); ids below 1000 belong to the system")
            }
            return low...high
        })
    }
}

extension ConfigValue where Value == [String] {
    /// Paths relative to /etc, none with a `..`.
    static var etcFiles: ConfigValue {
        ConfigValue(reading: { (text: String) throws(ConfigProblem) -> [String] in
            let names = ConfigText.words(text)
            if let bad = names.first(where: {
                $0.hasPrefix("/") || $0.split(separator: "/").contains("..")
            }) {
                throw .notA("a list of paths relative to /etc (\(bad) is not)")
            }
            return names
        })
    }
}

extension ConfigValue where Value == String {
    /// `PATH`: absolute directories separated by `:`.
    static var searchPath: ConfigValue {
        ConfigValue("a ':'-separated list of absolute directories") {
            !$0.isEmpty && $0.split(separator: ":").allSatisfy { $0.hasPrefix("/") } ? $0 : nil
        }
    }
}

extension ConfigValue where Value == UInt64 {
    static var openFiles: ConfigValue {
        ConfigValue("a number of at least 64") { UInt64($0).flatMap { $0 >= 64 ? $0 : nil } }
    }
}

extension ConfigValue where Value == UInt32 {
    /// An octal file mode, `0660`.
    static var octalMode: ConfigValue {
        ConfigValue("an octal mode like 0660") {
            UInt32($0, radix: 8).flatMap { $0 <= 0o777 ? $0 : nil }
        }
    }
}

extension ConfigValue where Value == Set<SandboxSettings.WeakerMode> {
    static var weakerModes: ConfigValue {
        ConfigValue(reading: {
            (text: String) throws(ConfigProblem) -> Set<SandboxSettings.WeakerMode> in
            var modes: Set<SandboxSettings.WeakerMode> = []
            for name in ConfigText.words(text) {
                guard let mode = SandboxSettings.WeakerMode(rawValue: name) else {
                    let known = SandboxSettings.WeakerMode.allCases.map(\.rawValue).joined(
                        separator: ", ")
                    throw .notA("a list of weaker modes (\(name) is not one of: \(known))")
                }
                modes.insert(mode)
            }
            return modes
        })
    }
}

extension ConfigValue where Value == [UInt16] {
    /// Ports 1-65535, space-separated, at most 64; empty: none.
    static var loopbackPorts: ConfigValue {
        ConfigValue(reading: { (text: String) throws(ConfigProblem) -> [UInt16] in
            var ports: [UInt16] = []
            for word in ConfigText.words(text) {
                guard let port = UInt16(word), port > 0 else {
                    throw .notA(
                        "a space-separated list of ports 1-65535 (\(word) is not), empty for none")
                }
                if !ports.contains(port) { ports.append(port) }
            }
            guard ports.count <= 64 else { throw .notA("at most 64 ports (\(ports.count) given)") }
            return ports
        })
    }
}

extension ConfigValue where Value == AccessList {
    static var accessList: ConfigValue {
        ConfigValue(reading: { (text: String) throws(ConfigProblem) -> AccessList in
            do throws(AccessListError) { return try AccessList(text) } catch {
                throw .notA("a list of root, *, @group or user names ('\(error.word)')")
            }
        })
    }
}

extension ConfigValue where Value == StorageSettings.Level {
    static var freeSpaceLevel: ConfigValue {
        ConfigValue(
            "a free-space level: a share of the filesystem from 1% to 99% (10%) or a size (2G)"
        ) {
            StorageSettings.Level($0)
        }
    }
}

extension ConfigValue where Value == [HookRule] {
    static var hooks: ConfigValue {
        ConfigValue(
            "entries PATH[:ARGV0[:NAME,NAME]], space-separated, at most \(OCISettings.maximumHooks): absolute paths, variable names never the loader's (LD_*, GCONV_PATH, GLIBC_TUNABLES...)"
        ) { text in
            let entries = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map {
                HookRule(parsing: String($0))
            }
            guard entries.allSatisfy({ $0 != nil }), entries.count <= OCISettings.maximumHooks
            else {
                return nil
            }
            return entries.compactMap { $0 }
        }
    }
}

extension ConfigValue where Value == ServiceSettings.KeepAlive {
    /// yes, no (or any boolean) or on-failure.
    static var keepAlive: ConfigValue {
        ConfigValue("yes, no or on-failure") { text in
            ConfigText.boolean(text).map { $0 ? .yes : .no }
                ?? ServiceSettings.KeepAlive(rawValue: text)
        }
    }
}

extension ConfigValue where Value == ServiceSettings.Written<[String]> {
    /// Words, quoted as a shell's plain quoting does.
    static var arguments: ConfigValue {
        ConfigValue(reading: {
            (text: String) throws(ConfigProblem) -> ServiceSettings.Written<[String]> in
            switch ServiceSettings.words(text) {
            case .failure(let problem): throw .notA("a list of words (\(problem))")
            case .success(let words): return .init(text: text, value: words)
            }
        })
    }
}

extension ConfigValue where Value == ServiceSettings.Written<[ServiceSettings.Variable]> {
    /// `NAME=value` words; a name given twice keeps its last value.
    static var environment: ConfigValue {
        ConfigValue(reading: { (text: String) throws(ConfigProblem) -> Value in
            var variables: [ServiceSettings.Variable] = []
            let words: [String]
            switch ServiceSettings.words(text) {
            case .failure(let problem): throw .notA("a list of NAME=value words (\(problem))")
            case .success(let read): words = read
            }
            for word in words {
                switch ServiceSettings.variable(word) {
                case .failure(let problem): throw .notA("a list of NAME=value words (\(problem))")
                case .success(let variable):
                    variables.removeAll { $0.name == variable.name }
                    variables.append(variable)
                }
            }
            return .init(text: text, value: variables)
        })
    }
}

extension ConfigValue where Value == ServiceSettings.Written<CalendarInterval> {
    /// A calendar event (CalendarInterval: a subset of systemd's OnCalendar=).
    static var calendarInterval: ConfigValue {
        ConfigValue(reading: {
            (text: String) throws(ConfigProblem) -> ServiceSettings.Written<CalendarInterval> in
            switch CalendarInterval.parse(text) {
            case .failure(let problem):
                throw .notA(
                    "a calendar event (daily, hourly, Mon..Fri 09:00, *-*-* 03:30, ...): \(problem)"
                )
            case .success(let event): return .init(text: text, value: event)
            }
        })
    }
}
