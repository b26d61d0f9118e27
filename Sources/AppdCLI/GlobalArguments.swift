import Glibc

/// Global options on either side of the subcommand, as git takes them: `appd --root /tmp/r
/// list` and `appd list --root /tmp/r` mean the same. ArgumentParser reads options only after
/// the subcommand that declares them, so the ones before it are moved there.
public enum GlobalArguments {
    /// Moves the global options in front of the subcommand (`valued` take the next argument or
    /// `--name=value`; `flags` stand alone) to just after it. Stops at the first other
    /// argument: that is the subcommand, and what follows it is left as it is.
    public static func hoist(_ arguments: [String], valued: Set<String>, flags: Set<String>)
        -> [String]
    {
        var leading: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let name = String(argument.prefix { $0 != "=" })
            if valued.contains(argument), index + 1 < arguments.count {
                leading += arguments[index...index + 1]
                index += 2
            } else if flags.contains(argument) || (valued.contains(name) && argument.contains("="))
            {
                leading.append(argument)
                index += 1
            } else {
                break
            }
        }
        guard !leading.isEmpty, index < arguments.count else { return arguments }
        return [arguments[index]] + leading + arguments[(index + 1)...]
    }
}

extension GlobalArguments {
    /// The subcommand meant by a word that names none (`lauch` → `launch`): the one closest in
    /// edit distance, if no other is as close and it is near enough for the word's length
    /// (one edit from 4 letters, two from 6; none under 4: `ls` is as likely `list` as `ps`).
    public static func suggestion(for word: String, among names: [String]) -> String? {
        let word = Array(word.lowercased())
        guard word.count >= 4, word.count <= 40 else { return nil }
        let allowed = word.count >= 6 ? 2 : 1
        let scored = names.map { (name: $0, distance: editDistance(word, Array($0))) }
        guard let best = scored.min(by: { $0.distance < $1.distance }), best.distance <= allowed,
            scored.filter({ $0.distance == best.distance }).count == 1
        else { return nil }
        return best.name
    }

    /// Levenshtein distance, with a swap of two neighbours counting as one edit (`lanuch`).
    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var before = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    current[j] = min(current[j], before[j - 2] + 1)
                }
            }
            (before, previous, current) = (previous, current, before)
        }
        return previous[b.count]
    }

    /// Exits with a usage error (64, as ArgumentParser's) when the subcommand in `arguments`
    /// (after hoisting) is unknown but is a word `elsewhere` knows (the other tool's command,
    /// another tool's name for one of ours: `appctl install` → `appd install`, `stop` →
    /// `terminate`) or is close to a known one; otherwise does nothing and lets ArgumentParser
    /// parse as usual.
    public static func refuseMisspelledSubcommand(
        _ arguments: [String], program: String, subcommands: [String],
        elsewhere: [String: String] = [:]
    ) {
        guard let first = arguments.first, !first.hasPrefix("-"), !subcommands.contains(first),
            first != "help"
        else { return }
        var message: String
        if let meant = elsewhere[first.lowercased()] {
            message =
                "Error: \(program) has no command '\(first)': \(first.lowercased()) is '\(meant)'\n"
        } else if let guess = suggestion(for: first, among: subcommands) {
            message = "Error: unknown command '\(first)'. Did you mean '\(guess)'?\n"
        } else {
            return
        }
        message += "See '\(program) --help' for the commands.\n"
        let bytes = Array(message.utf8)
        _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        exit(64)
    }
}
