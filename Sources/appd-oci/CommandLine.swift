import AppdBase

/// appd-oci's command line, runc's (docs/oci-runtime.md, "Commands"): global options, a
/// command, its options, its operands. Written by hand, not with ArgumentParser: the callers
/// are programs (containerd's shim, conmon, dockerd) that put global options before the
/// command, use `-flag`, `--flag`, `--flag=value` and `--flag value` alike, and pass options
/// appd-oci has no use for (`--no-pivot`, `--criu`); those are accepted and ignored.
struct OCICommandLine {
    var root = StateRoot.defaultPath
    var log: String?
    var logFormat = "text"
    var systemdCgroup = false
    var plain = false
    /// appd.conf (`--config`, else `APPD_CONFIG`, else /etc/appd/appd.conf).
    var config: String?
    var command = ""
    /// The command's options by long name (`bundle`, `pid-file`), flags as "".
    var options: [String: String] = [:]
    var operands: [String] = []

    /// Global options that take a value, and flags, as runc has them.
    static let globalValues: Set<String> = [
        "root", "log", "log-format", "criu", "rootless", "config",
    ]
    static let globalFlags: Set<String> = ["debug", "systemd-cgroup", "plain"]

    /// Each command's options taking a value (long names; short ones are mapped below).
    static let commandValues: [String: Set<String>] = [
        "create": ["bundle", "pid-file", "console-socket", "preserve-fds"],
        "run": ["bundle", "pid-file", "console-socket", "preserve-fds"],
        "exec": [
            "process", "pid-file", "console-socket", "cwd", "env", "user", "cap",
            "process-label", "apparmor", "preserve-fds", "cgroup",
        ],
        "update": [
            "resources", "memory", "memory-reservation", "memory-swap", "pids-limit",
            "cpu-shares", "cpu-quota", "cpu-period", "cpuset-cpus", "cpuset-mems", "kernel-memory",
            "kernel-memory-tcp", "blkio-weight", "l3-cache-schema", "mem-bw-schema",
        ],
        "ps": ["format"],
        "kill": [],
        "delete": [],
        "start": [],
        "state": [],
        "pause": [],
        "resume": [],
        "features": [],
        "list": ["format"],
    ]
    static let shortNames: [String: String] = [
        "b": "bundle", "p": "process", "d": "detach", "t": "tty", "a": "all", "f": "force",
        "r": "resources", "e": "env", "q": "quiet", "u": "user", "c": "cap", "h": "help",
        "v": "version",
    ]

    static func parse(_ arguments: [String]) throws -> OCICommandLine {
        var line = OCICommandLine()
        var index = 0
        var inCommand = false
        var operandsOnly = false
        func name(_ argument: String) -> (String, String?) {
            var text = Substring(argument.drop(while: { $0 == "-" }))
            var value: String?
            if let equals = text.firstIndex(of: "=") {
                value = String(text[text.index(after: equals)...])
                text = text[..<equals]
            }
            let long = String(text)
            return (shortNames[long] ?? long, value)
        }
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if operandsOnly || !argument.hasPrefix("-") || argument == "-" {
                if !inCommand {
                    line.command = argument
                    inCommand = true
                    guard commandValues[argument] != nil else {
                        throw AppdError(
                            .badRequest,
                            "unknown command '\(argument)'; the commands are \(commandValues.keys.sorted().joined(separator: ", "))"
                        )
                    }
                } else {
                    line.operands.append(argument)
                    // exec's process arguments follow the id: they are the app's, not ours.
                    if line.command == "exec" { operandsOnly = true }
                }
                continue
            }
            if argument == "--" {
                operandsOnly = true
                continue
            }
            let (option, inline) = name(argument)
            let takesValue =
                inCommand
                ? commandValues[line.command]?.contains(option) == true
                : globalValues.contains(option)
            var value = inline ?? ""
            if takesValue && inline == nil {
                guard index < arguments.count else {
                    throw AppdError(.badRequest, "--\(option) needs a value")
                }
                value = arguments[index]
                index += 1
            }
            if inCommand {
                if option == "env" || option == "cap", let old = line.options[option] {
                    line.options[option] = old + "\n" + value
                } else {
                    line.options[option] = value
                }
                continue
            }
            switch option {
            case "root": line.root = value
            case "log": line.log = value
            case "log-format": line.logFormat = value
            case "systemd-cgroup": line.systemdCgroup = true
            case "plain": line.plain = true
            case "config": line.config = value
            case "version": line.command = "--version"
            case "help": line.command = "--help"
            default: break  // --debug, --criu, --rootless: nothing to do
            }
            if line.command.hasPrefix("--") { return line }
        }
        return line
    }

    /// The container id: the command's first operand.
    func id() throws -> String {
        guard let id = operands.first else {
            throw AppdError(.badRequest, "\(command) needs a container id")
        }
        try StateRoot.validate(id)
        return id
    }

    func flag(_ name: String) -> Bool { options[name] != nil }
}
