import Glibc

/// `appd-exec --profile-fd N --seccomp-fd M [--status-fd S] [--channel-fd C]`
struct Arguments {
    var profileFD: Int32
    var seccompFD: Int32
    var statusFD: Int32?
    /// The app's end of the lifecycle channel: fd 3 in the app (docs/lifecycle.md).
    var channelFD: Int32?

    static let usage = "usage: appd-exec --profile-fd N --seccomp-fd M [--status-fd S] [--channel-fd C]"

    /// `statusFD` is set as soon as `--status-fd` is read, so that a later argument error can
    /// still be reported there.
    static func parse(_ argv: [String], statusFD: inout Int32?) throws -> Arguments {
        var profileFD: Int32?
        var seccompFD: Int32?
        var channelFD: Int32?
        var index = 1
        while index < argv.count {
            let option = argv[index]
            guard index + 1 < argv.count, let fd = descriptor(argv[index + 1]) else {
                throw LaunchFailure("arguments", "\(option) needs an fd number; \(usage)")
            }
            switch option {
            case "--profile-fd" where profileFD == nil: profileFD = fd
            case "--seccomp-fd" where seccompFD == nil: seccompFD = fd
            case "--status-fd" where statusFD == nil: statusFD = fd
            case "--channel-fd" where channelFD == nil: channelFD = fd
            default: throw LaunchFailure("arguments", "unexpected '\(option)'; \(usage)")
            }
            index += 2
        }
        guard let profileFD, let seccompFD else {
            throw LaunchFailure("arguments", "--profile-fd and --seccomp-fd are required; \(usage)")
        }
        for fd in [profileFD, seccompFD] + [statusFD, channelFD].compactMap({ $0 }) {
            try sys(fcntl(fd, F_GETFD), "arguments", "fd \(fd) is not open")
        }
        return Arguments(profileFD: profileFD, seccompFD: seccompFD, statusFD: statusFD, channelFD: channelFD)
    }

    private static func descriptor(_ text: String) -> Int32? {
        guard let value = ProfileParser.number(text), value <= Int32.max else { return nil }
        return Int32(value)
    }
}
