import PrintableText

/// `AppdHostExecutables` in Info.plist: the programs of the host an app may execute, besides
/// its bundle's own (docs/info-plist.md). Everything else of the host is not executable to it
/// (Landlock EXECUTE, SandboxPolicy+Layers). The key is signed with the bundle, and a signer
/// may grant only the paths its `[Signer] HostExecutables=` allows (SigningPolicy).
///
/// Some programs run code handed to them at run time (a shell, python3, perl, busybox): an app
/// that may run one can run code that was never signed, through it. `isInterpreter` names
/// them, and `appd verify`, `appd profile` and the install's refusal say so.
public enum HostExecutables {
    public static let infoKey = "AppdHostExecutables"
    public static let maxCount = 32
    public static let maxPathBytes = 1024

    /// The validated paths of `raw`'s `AppdHostExecutables`; each problem is appended, naming
    /// the key (an install with any is refused).
    public static func paths(in raw: [String: PlistValue], problems: inout [String]) -> [String] {
        guard let value = raw[infoKey] else { return [] }
        guard case .array(let items) = value else {
            problems.append("\(infoKey) must be an array of strings, not a \(value.typeName)")
            return []
        }
        guard items.count <= maxCount else {
            problems.append("\(infoKey) names \(items.count) programs; at most \(maxCount)")
            return []
        }
        var paths: [String] = []
        for item in items {
            guard case .string(let path) = item else {
                problems.append("\(infoKey) holds a \(item.typeName); it holds paths (strings)")
                continue
            }
            if let why = problem(path) {
                problems.append("\(infoKey) '\(Printable(path))' \(why)")
            } else if paths.contains(path) {
                problems.append("\(infoKey) names '\(Printable(path))' twice")
            } else {
                paths.append(path)
            }
        }
        return paths
    }

    /// Why `path` is not an absolute, normal path of a program, or nil.
    static func problem(_ path: String) -> String? {
        if let control = Printable.firstControl(in: path) {
            return "holds the control character \(Printable.codePoint(control))"
        }
        guard path.hasPrefix("/"), path.count > 1 else { return "is not an absolute path" }
        guard path.utf8.count <= maxPathBytes else { return "is over \(maxPathBytes) bytes" }
        let parts = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        guard parts.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." }) else {
            return "is not a normal path (an empty, '.' or '..' component, or a trailing '/')"
        }
        return nil
    }

    /// Program names (the file's name, versions cut: `python3.11` is `python`) that run code
    /// they are given: shells, script interpreters, and the multi-call programs holding them.
    static let interpreterNames: Set<String> = [
        "sh", "bash", "dash", "zsh", "ksh", "mksh", "csh", "tcsh", "fish", "ash", "busybox",
        "toybox", "python", "pypy", "perl", "ruby", "irb", "node", "nodejs", "deno", "bun", "php",
        "lua", "luajit", "tclsh", "wish", "expect", "awk", "gawk", "mawk", "nawk", "guile", "java",
        "jshell", "R", "Rscript", "pwsh", "gdb", "vim", "vi", "nvim", "emacs", "ed", "sed",
        "sqlite", "env", "xargs", "find", "make", "bc", "dc", "m4", "julia", "ocaml", "erl",
        "escript", "swift", "qjs", "osascript",
    ]

    /// Whether the program at `path` (its name; a symlink's target where the caller resolved
    /// it) runs code it is given, so that an app allowed it may run unsigned code.
    public static func isInterpreter(_ path: String) -> Bool {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        if name.hasPrefix("ld-") || name.hasPrefix("ld.so") { return true }
        // python3.11 → python, perl5.36.0 → perl, lua5.4 → lua, ruby3.1 → ruby.
        let base = String(name.prefix { !$0.isNumber && $0 != "." })
        return interpreterNames.contains(base) || interpreterNames.contains(name)
    }
}

extension InfoPlist {
    /// `AppdHostExecutables` (validated when the bundle was opened).
    public var hostExecutables: [String] {
        var ignored: [String] = []
        return HostExecutables.paths(in: raw, problems: &ignored)
    }
}
