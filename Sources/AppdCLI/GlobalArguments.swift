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
