import Glibc

/// `appd-exec --profile-fd N --seccomp-fd M [--status-fd S] [--channel-fd C]
///  [--output-fd R --log-dir-fd D --log-name NAME --log-max-bytes N
///   [--journal-fd J] [--journal-field KEY=VALUE]...]`
struct Arguments {
    var profileFD: Int32
    var seccompFD: Int32
    var statusFD: Int32?
    /// The app's end of the lifecycle channel: fd 3 in the app (docs/lifecycle.md).
    var channelFD: Int32?
    /// The output relay's settings (docs/app-output.md); nil: 0-2 pass through to the app.
    var output: OutputSettings?

    static let usage =
        "usage: appd-exec --profile-fd N --seccomp-fd M [--status-fd S] [--channel-fd C] "
        + "[--output-fd R --log-dir-fd D --log-name NAME --log-max-bytes N [--journal-fd J] [--journal-field KEY=VALUE]...]"

    /// `statusFD` is set as soon as `--status-fd` is read, so that a later argument error can
    /// still be reported there.
    static func parse(_ argv: [String], statusFD: inout Int32?) throws -> Arguments {
        // One variable per fd option, not a [String: Int32]: a Dictionary's generic metadata
        // and its Hashable conformance are looked up at run time, on every launch.
        var profileFD, seccompFD, channelFD, outputFD, logDirectoryFD, journalFD: Int32?
        var statusGiven = false
        var logName: String?
        var logMaxBytes: Int?
        var fields: [String] = []
        var index = 1
        while index < argv.count {
            let option = argv[index]
            guard index + 1 < argv.count else {
                throw LaunchFailure("arguments", "\(option) needs a value; \(usage)")
            }
            let value = argv[index + 1]
            switch option {
            case "--profile-fd", "--seccomp-fd", "--status-fd", "--channel-fd", "--output-fd",
                "--log-dir-fd",
                "--journal-fd":
                let given: Bool
                switch option {
                case "--profile-fd": given = profileFD != nil
                case "--seccomp-fd": given = seccompFD != nil
                case "--status-fd": given = statusGiven
                case "--channel-fd": given = channelFD != nil
                case "--output-fd": given = outputFD != nil
                case "--log-dir-fd": given = logDirectoryFD != nil
                default: given = journalFD != nil
                }
                guard !given else {
                    throw LaunchFailure("arguments", "\(option) given twice; \(usage)")
                }
                guard let fd = descriptor(value) else {
                    throw LaunchFailure("arguments", "\(option) needs an fd number; \(usage)")
                }
                switch option {
                case "--profile-fd": profileFD = fd
                case "--seccomp-fd": seccompFD = fd
                case "--status-fd":
                    statusFD = fd
                    statusGiven = true
                case "--channel-fd": channelFD = fd
                case "--output-fd": outputFD = fd
                case "--log-dir-fd": logDirectoryFD = fd
                default: journalFD = fd
                }
            case "--log-name" where logName == nil:
                guard isPlainName(value) else {
                    throw LaunchFailure(
                        "arguments", "--log-name '\(value)' must be a file name without '/'")
                }
                logName = value
            case "--log-max-bytes" where logMaxBytes == nil:
                guard let number = ProfileParser.number(value), number >= 1,
                    number <= UInt64(Int32.max)
                else {
                    throw LaunchFailure(
                        "arguments", "--log-max-bytes '\(value)' must be 1 to \(Int32.max)")
                }
                logMaxBytes = Int(number)
            case "--journal-field":
                guard isJournalField(value) else {
                    throw LaunchFailure(
                        "arguments",
                        "--journal-field '\(value)' must be KEY=VALUE (KEY of A-Z 0-9 _, no newline)"
                    )
                }
                fields.append(value)
            default: throw LaunchFailure("arguments", "unexpected '\(option)'; \(usage)")
            }
            index += 2
        }
        guard let profileFD, let seccompFD else {
            throw LaunchFailure("arguments", "--profile-fd and --seccomp-fd are required; \(usage)")
        }
        func checkOpen(_ fd: Int32?) throws {
            guard let fd else { return }
            try sys(fcntl(fd, F_GETFD), "arguments", "fd \(fd) is not open")
        }
        try checkOpen(profileFD)
        try checkOpen(seccompFD)
        try checkOpen(statusGiven ? statusFD : nil)
        try checkOpen(channelFD)
        try checkOpen(outputFD)
        try checkOpen(logDirectoryFD)
        try checkOpen(journalFD)
        var arguments = Arguments(
            profileFD: profileFD, seccompFD: seccompFD, statusFD: statusFD,
            channelFD: channelFD)
        if let readFD = outputFD {
            guard let directory = logDirectoryFD, let logName, let logMaxBytes else {
                throw LaunchFailure(
                    "arguments",
                    "--output-fd needs --log-dir-fd, --log-name and --log-max-bytes; \(usage)")
            }
            arguments.output = OutputSettings(
                readFD: readFD, logDirectoryFD: directory, logName: logName,
                logMaxBytes: logMaxBytes,
                journalFD: journalFD ?? -1, journalFields: fields)
        } else if logDirectoryFD != nil || journalFD != nil || logName != nil
            || logMaxBytes != nil
            || !fields.isEmpty
        {
            throw LaunchFailure(
                "arguments", "the log and journal options need --output-fd; \(usage)")
        }
        return arguments
    }

    private static func descriptor(_ text: String) -> Int32? {
        guard let value = ProfileParser.number(text), value <= Int32.max else { return nil }
        return Int32(value)
    }

    private static func isPlainName(_ text: String) -> Bool {
        !text.isEmpty && text != "." && text != ".." && text.utf8.count <= 250
            && !text.utf8.contains(where: { $0 == UInt8(ascii: "/") || $0 == 0 })
    }

    /// journald's rule for field names, and a value that stays on its line.
    private static func isJournalField(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard let equals = bytes.firstIndex(of: UInt8(ascii: "=")), equals > 0, equals <= 64,
            bytes[0] != UInt8(ascii: "_"), !bytes.contains(UInt8(ascii: "\n"))
        else { return false }
        return bytes[..<equals].allSatisfy {
            ($0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z"))
                || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9"))
                || $0 == UInt8(ascii: "_")
        }
    }
}
