import Glibc
import LauncherProtocol

/// `appd-exec --profile-fd N --seccomp-fd M [--status-fd S] [--channel-fd C]
///  [--output-fd R --log-dir-fd D --log-name NAME --log-max-bytes N
///   [--journal-fd J] [--journal-field KEY=VALUE]...]
///  [--mount-ns-fd F --root-fd F [--net-ns-fd F] [--uts-ns-fd F]]`, or
/// `appd-exec --template --profile-fd N --status-fd S` (docs/launcher-protocol.md, "Shared
/// namespaces"). The option names are LauncherProtocol's `LauncherFlag`, which the daemon passes.
struct Arguments {
    var profileFD: Int32
    var seccompFD: Int32
    var statusFD: Int32?
    /// The app's end of the lifecycle channel: fd 3 in the app (docs/lifecycle.md).
    var channelFD: Int32?
    /// The output relay's settings (docs/app-output.md); nil: 0-2 pass through to the app.
    var output: OutputSettings?
    /// `--template`: build the app's shared namespaces, say `ready` on the status fd and wait
    /// to be killed (the daemon keeps the namespaces by fd).
    var template = false
    /// The app's shared namespaces to join instead of building them (nil: build them).
    var joined: JoinedNamespaces?
    /// appd-oci's created state: the pipe the app process says `ready` on, and the start gate
    /// (an `O_PATH` fd of the FIFO it waits on); -1 when not given.
    var readyFD: Int32 = -1
    var startFD: Int32 = -1
    /// A pidfd of a process of a running sandbox whose namespaces to enter (`appd-oci exec`).
    var enterFD: Int32 = -1
    /// `--init-signals`: forward a signal to the app only if it handles it.
    var initSignals = false

    static var usage: String { LauncherFlag.usage }

    /// `statusFD` is set as soon as `--status-fd` is read, so that a later argument error can
    /// still be reported there.
    static func parse(_ argv: [String], statusFD: inout Int32?) throws -> Arguments {
        // One variable per fd option, not a [String: Int32]: a Dictionary's generic metadata
        // and its Hashable conformance are looked up at run time, on every launch.
        var profileFD: Int32?
        var seccompFD: Int32?
        var channelFD: Int32?
        var outputFD: Int32?
        var logDirectoryFD: Int32?
        var journalFD: Int32?
        var mountNamespaceFD: Int32?
        var rootFD: Int32?
        var netNamespaceFD: Int32?
        var utsNamespaceFD: Int32?
        var ipcNamespaceFD: Int32?
        var pidNamespaceFD: Int32?
        var readyFD: Int32?
        var startFD: Int32?
        var enterFD: Int32?
        var statusGiven = false
        var template = false
        var initSignals = false
        var logName: String?
        var logMaxBytes: Int?
        var fields: [String] = []
        var index = 1
        while index < argv.count {
            let option = argv[index]
            if option == LauncherFlag.template && !template {
                template = true
                index += 1
                continue
            }
            if option == LauncherFlag.initSignals && !initSignals {
                initSignals = true
                index += 1
                continue
            }
            guard index + 1 < argv.count else {
                throw LaunchFailure("arguments", "\(option) needs a value; \(usage)")
            }
            let value = argv[index + 1]
            switch option {
            case LauncherFlag.profileFD, LauncherFlag.seccompFD, LauncherFlag.statusFD,
                LauncherFlag.channelFD, LauncherFlag.outputFD, LauncherFlag.logDirectoryFD,
                LauncherFlag.journalFD, LauncherFlag.mountNamespaceFD, LauncherFlag.rootFD,
                LauncherFlag.netNamespaceFD, LauncherFlag.utsNamespaceFD,
                LauncherFlag.ipcNamespaceFD, LauncherFlag.pidNamespaceFD, LauncherFlag.readyFD,
                LauncherFlag.startFD, LauncherFlag.enterFD:
                let given: Bool
                switch option {
                case LauncherFlag.profileFD: given = profileFD != nil
                case LauncherFlag.seccompFD: given = seccompFD != nil
                case LauncherFlag.statusFD: given = statusGiven
                case LauncherFlag.channelFD: given = channelFD != nil
                case LauncherFlag.outputFD: given = outputFD != nil
                case LauncherFlag.logDirectoryFD: given = logDirectoryFD != nil
                case LauncherFlag.mountNamespaceFD: given = mountNamespaceFD != nil
                case LauncherFlag.rootFD: given = rootFD != nil
                case LauncherFlag.netNamespaceFD: given = netNamespaceFD != nil
                case LauncherFlag.utsNamespaceFD: given = utsNamespaceFD != nil
                case LauncherFlag.ipcNamespaceFD: given = ipcNamespaceFD != nil
                case LauncherFlag.pidNamespaceFD: given = pidNamespaceFD != nil
                case LauncherFlag.readyFD: given = readyFD != nil
                case LauncherFlag.startFD: given = startFD != nil
                case LauncherFlag.enterFD: given = enterFD != nil
                default: given = journalFD != nil
                }
                guard !given else {
                    throw LaunchFailure("arguments", "\(option) given twice; \(usage)")
                }
                guard let fd = descriptor(value) else {
                    throw LaunchFailure("arguments", "\(option) needs an fd number; \(usage)")
                }
                switch option {
                case LauncherFlag.profileFD: profileFD = fd
                case LauncherFlag.seccompFD: seccompFD = fd
                case LauncherFlag.statusFD:
                    statusFD = fd
                    statusGiven = true
                case LauncherFlag.channelFD: channelFD = fd
                case LauncherFlag.outputFD: outputFD = fd
                case LauncherFlag.logDirectoryFD: logDirectoryFD = fd
                case LauncherFlag.mountNamespaceFD: mountNamespaceFD = fd
                case LauncherFlag.rootFD: rootFD = fd
                case LauncherFlag.netNamespaceFD: netNamespaceFD = fd
                case LauncherFlag.utsNamespaceFD: utsNamespaceFD = fd
                case LauncherFlag.ipcNamespaceFD: ipcNamespaceFD = fd
                case LauncherFlag.pidNamespaceFD: pidNamespaceFD = fd
                case LauncherFlag.readyFD: readyFD = fd
                case LauncherFlag.startFD: startFD = fd
                case LauncherFlag.enterFD: enterFD = fd
                default: journalFD = fd
                }
            case LauncherFlag.logName where logName == nil:
                guard isPlainName(value) else {
                    throw LaunchFailure(
                        "arguments", "--log-name '\(value)' must be a file name without '/'")
                }
                logName = value
            case LauncherFlag.logMaxBytes where logMaxBytes == nil:
                guard let number = ProfileParser.number(value), number >= 1,
                    number <= UInt64(Int32.max)
                else {
                    throw LaunchFailure(
                        "arguments", "--log-max-bytes '\(value)' must be 1 to \(Int32.max)")
                }
                logMaxBytes = Int(number)
            case LauncherFlag.journalField:
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
        if template {
            guard let profileFD, statusGiven, let statusFD else {
                throw LaunchFailure(
                    "arguments", "--template needs --profile-fd and --status-fd; \(usage)")
            }
            guard seccompFD == nil, channelFD == nil, outputFD == nil, logDirectoryFD == nil,
                journalFD == nil,
                logName == nil, logMaxBytes == nil, fields.isEmpty, mountNamespaceFD == nil,
                rootFD == nil, netNamespaceFD == nil, utsNamespaceFD == nil,
                ipcNamespaceFD == nil, pidNamespaceFD == nil, readyFD == nil,
                startFD == nil, enterFD == nil
            else {
                throw LaunchFailure(
                    "arguments", "--template takes only --profile-fd and --status-fd; \(usage)")
            }
            try sys(fcntl(profileFD, F_GETFD), "arguments", "fd \(profileFD) is not open")
            try sys(fcntl(statusFD, F_GETFD), "arguments", "fd \(statusFD) is not open")
            var arguments = Arguments(profileFD: profileFD, seccompFD: -1, statusFD: statusFD)
            arguments.template = true
            return arguments
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
        try checkOpen(mountNamespaceFD)
        try checkOpen(rootFD)
        try checkOpen(netNamespaceFD)
        try checkOpen(utsNamespaceFD)
        try checkOpen(ipcNamespaceFD)
        try checkOpen(pidNamespaceFD)
        try checkOpen(readyFD)
        try checkOpen(startFD)
        try checkOpen(enterFD)
        var arguments = Arguments(
            profileFD: profileFD, seccompFD: seccompFD, statusFD: statusFD,
            channelFD: channelFD)
        if let mountNamespaceFD {
            guard let rootFD else {
                throw LaunchFailure("arguments", "--mount-ns-fd needs --root-fd; \(usage)")
            }
            guard ipcNamespaceFD == nil, pidNamespaceFD == nil else {
                throw LaunchFailure(
                    "arguments", "--mount-ns-fd takes no --ipc-ns-fd or --pid-ns-fd; \(usage)")
            }
            arguments.joined = JoinedNamespaces(
                mount: mountNamespaceFD, root: rootFD, net: netNamespaceFD ?? -1,
                uts: utsNamespaceFD ?? -1)
        } else if rootFD != nil {
            throw LaunchFailure("arguments", "--root-fd needs --mount-ns-fd; \(usage)")
        } else if netNamespaceFD != nil || utsNamespaceFD != nil || ipcNamespaceFD != nil
            || pidNamespaceFD != nil
        {
            // A pod's network, uts, ipc and pid namespaces, joined by a launch that builds its
            // own root.
            arguments.joined = JoinedNamespaces(
                mount: -1, root: -1, net: netNamespaceFD ?? -1, uts: utsNamespaceFD ?? -1,
                ipc: ipcNamespaceFD ?? -1, pid: pidNamespaceFD ?? -1)
        }
        guard (readyFD == nil) == (startFD == nil) else {
            throw LaunchFailure("arguments", "--ready-fd and --start-fd go together; \(usage)")
        }
        if let enterFD {
            guard arguments.joined == nil, startFD == nil, outputFD == nil, channelFD == nil
            else {
                throw LaunchFailure(
                    "arguments",
                    "--enter-fd takes no namespace, gate, output or channel options; \(usage)")
            }
            arguments.enterFD = enterFD
        }
        arguments.initSignals = initSignals
        arguments.readyFD = readyFD ?? -1
        arguments.startFD = startFD ?? -1
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
