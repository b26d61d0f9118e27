import AppdAPI
import AppdBase

#if canImport(FoundationEssentials)
    import AppdBase
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// `appctl --host ssh://[user@]host[:port][/socket]` (or `APPD_HOST`): the daemon of another
/// machine, reached the way Docker reaches one (`docker system dial-stdio`): every connection
/// runs `ssh host appctl system dial-stdio`, whose stdin and stdout are relayed to the remote
/// socket, so the request reaches appd as the remote user (its SO_PEERCRED) and that user's
/// rights apply. ssh does the authentication with the user's own configuration, keys and agent.
///
/// Why not `ssh -L local.sock:remote.sock`: it needs a background forwarder and a local socket
/// file to clean up; `ssh -W` forwards only host:port; and `nc -U`/`socat` are rarely installed
/// where appd is, while appctl always is.
public struct RemoteHost: Sendable, Equatable, CustomStringConvertible {
    public var user: String?
    public var host: String
    public var port: Int?
    /// The remote socket; nil: the remote appctl's default.
    public var socket: String?
    /// The remote command (`appctl`; APPD_REMOTE_APPCTL overrides it, for a tool not on PATH).
    public var remoteAppctl = "appctl"

    public var description: String {
        "ssh://" + (user.map { "\($0)@" } ?? "") + host + (port.map { ":\($0)" } ?? "")
            + (socket ?? "")
    }

    /// Parses `ssh://[user@]host[:port][/path/to/socket]`; nothing else is accepted, and no
    /// part may look like an ssh option.
    public init(parsing text: String) throws(AppdError) {
        func bad(_ why: String) -> AppdError {
            AppdError(
                .badRequest, "--host \(text): \(why)",
                hint: "write it as ssh://[user@]host[:port][/path/to/appd.sock]")
        }
        guard text.hasPrefix("ssh://") else { throw bad("only ssh:// hosts are supported") }
        var rest = Substring(text.dropFirst("ssh://".count))
        if let slash = rest.firstIndex(of: "/") {
            let path = String(rest[slash...])
            guard path.count > 1, !path.split(separator: "/").contains(".."),
                path.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "'" })
            else { throw bad("'\(path)' is not an absolute socket path") }
            socket = path
            rest = rest[..<slash]
        }
        if let at = rest.lastIndex(of: "@") {
            let name = String(rest[..<at])
            guard Self.isName(name) else { throw bad("'\(name)' is not a user name") }
            user = name
            rest = rest[rest.index(after: at)...]
        }
        if let colon = rest.lastIndex(of: ":"),
            !rest.hasPrefix("[") || rest[..<colon].hasSuffix("]")
        {
            let digits = rest[rest.index(after: colon)...]
            guard let number = Int(digits), (1...65535).contains(number) else {
                throw bad("'\(digits)' is not a port (1-65535)")
            }
            port = number
            rest = rest[..<colon]
        }
        if rest.hasPrefix("["), rest.hasSuffix("]") { rest = rest.dropFirst().dropLast() }
        guard Self.isName(String(rest)) else {
            throw bad("'\(rest)' is not a host name or address")
        }
        host = String(rest)
    }

    /// Letters, digits and `._-:%` (IPv6 addresses), not starting with `-` (an ssh option).
    static func isName(_ text: String) -> Bool {
        !text.isEmpty && text.count <= 255 && !text.hasPrefix("-")
            && text.unicodeScalars.allSatisfy {
                $0.isASCII
                    && (CharacterSetCheck.alphanumeric($0) || "._-:%".unicodeScalars.contains($0))
            }
    }

    /// The ssh command line: no tty, no X11, no escape character, then the remote command.
    var arguments: [String] {
        var arguments = ["ssh", "-T", "-x", "-e", "none", "-o", "ConnectTimeout=15"]
        if let port { arguments += ["-p", String(port)] }
        if let user { arguments += ["-l", user] }
        var command = "\(remoteAppctl) system dial-stdio"
        // Checked in init to hold no quote or space; quoted for the remote shell all the same.
        if let socket { command += " --socket '\(socket)'" }
        return arguments + ["--", host, command]
    }

    /// Starts ssh with one end of a socketpair as its stdin and stdout and a pipe as its
    /// stderr; the other end is the connection.
    func connect(timeout: Double?) throws -> UnixConnection {
        var pair: [Int32] = [-1, -1]
        guard
            socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0, &pair) == 0
        else { throw TransportError.socket(errno: errno) }
        var errorPipe: [Int32] = [-1, -1]
        // Glibc's Swift module has no pipe2; appctl starts no threads that could fork meanwhile.
        guard pipe(&errorPipe) == 0, fcntl(errorPipe[0], F_SETFD, FD_CLOEXEC) == 0,
            fcntl(errorPipe[1], F_SETFD, FD_CLOEXEC) == 0
        else {
            let code = errno
            close(pair[0])
            close(pair[1])
            throw TransportError.socket(errno: code)
        }
        defer {
            close(pair[1])
            close(errorPipe[1])
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pair[1], 0)
        posix_spawn_file_actions_adddup2(&actions, pair[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errorPipe[1], 2)
        let argv = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, "ssh", &actions, nil, argv, environ)
        guard result == 0 else {
            close(pair[0])
            close(errorPipe[0])
            if result == ENOENT {
                throw AppdError(
                    .unavailable,
                    "ssh not found: appctl --host \(self) runs ssh to reach the remote appd",
                    errno: result, hint: "install OpenSSH's client (apt-get install openssh-client)"
                )
            }
            throw AppdError(
                .unavailable, "cannot start ssh for \(self): \(errnoText(result))",
                errno: result)
        }
        return UnixConnection(
            connected: pair[0], timeout: timeout,
            remote: RemoteProcess(pid: pid, errorFD: errorPipe[0], host: self))
    }
}

/// ASCII letters and digits, without Foundation.
enum CharacterSetCheck {
    static func alphanumeric(_ scalar: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
    }
}

/// The ssh process behind one connection: reaped when the connection closes, and asked why
/// when the daemon's answer never came.
final class RemoteProcess: @unchecked Sendable {
    let pid: pid_t
    let errorFD: Int32
    let host: RemoteHost
    private var status: Int32?

    init(pid: pid_t, errorFD: Int32, host: RemoteHost) {
        self.pid = pid
        self.errorFD = errorFD
        self.host = host
    }

    /// Waits up to `seconds` for ssh to end; its wait status, nil if it still runs.
    private func waitForExit(seconds: Double) -> Int32? {
        if let status { return status }
        let deadline = seconds * 1000
        var waited = 0.0
        while true {
            var raw: Int32 = 0
            let result = waitpid(pid, &raw, WNOHANG)
            if result == pid {
                status = raw
                return raw
            }
            if result < 0 && errno != EINTR { return nil }
            if waited >= deadline { return nil }
            usleep(20_000)
            waited += 20
        }
    }

    /// The connection is closed: ssh sees EOF and ends; if it does not, it is ended.
    func finish() {
        if waitForExit(seconds: 2) == nil {
            kill(pid, SIGTERM)
            if waitForExit(seconds: 2) == nil {
                kill(pid, SIGKILL)
                _ = waitForExit(seconds: 5)
            }
        }
        close(errorFD)
    }

    /// What ssh wrote on stderr (at most 16 KiB), once it has closed it.
    private func errorText() -> String {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var entry = pollfd(fd: errorFD, events: Int16(POLLIN), revents: 0)
        while bytes.count < 16384, poll(&entry, 1, 2000) > 0 {
            let count = retryingInterrupts { read(errorFD, &buffer, buffer.count) }
            if count <= 0 { break }
            bytes += buffer[..<count]
        }
        let text = String(decoding: bytes, as: UTF8.self)
        return text.split(separator: "\n").map { $0.trimmingWhitespace() }.filter {
            !$0.isEmpty
        }
        .suffix(3).joined(separator: "; ")
    }

    /// Why nothing came back: ssh could not reach the host, the remote appctl is missing, or
    /// the remote appctl could not reach its daemon; nil when ssh gave no sign of failing.
    func failure() -> AppdError? {
        let text = errorText()
        guard let raw = waitForExit(seconds: 10) else { return nil }
        let code = (raw & 0x7F) == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F)
        let said = text.isEmpty ? "" : ": \(text)"
        switch code {
        case 0:
            return nil
        case 255:
            return AppdError(
                .unavailable, "cannot reach \(host.host) over ssh\(said)",
                hint:
                    "check that 'ssh\(host.port.map { " -p \($0)" } ?? "") \(host.user.map { "\($0)@" } ?? "")\(host.host) true' works: appctl uses your ssh configuration, keys and agent"
            )
        case 126, 127:
            return AppdError(
                .unavailable,
                "appctl is not installed on \(host.host), or not on the remote user's PATH\(said)",
                hint: "install appd there (it brings appctl), or set APPD_REMOTE_APPCTL to its path"
            )
        default:
            return AppdError(
                .unavailable, "on \(host.host), appctl could not reach appd (exit \(code))\(said)",
                hint: host.socket == nil
                    ? "is appd running there? name its socket in the URL: \(host)/run/appd/appd.sock"
                    : "is appd running there with the socket \(host.socket ?? "")?")
        }
    }
}

extension AppdClient {
    /// The daemon `--host` or `$APPD_HOST` names (through ssh), else the local one
    /// `init(socket:root:environment:)` finds. With a host, `socket` is the remote socket;
    /// `$APPD_HOST` applies only when neither `--socket` nor `--root` is given.
    public init(
        socket: String?, root: String?, host: String?,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(AppdError) {
        let fromEnvironment =
            socket == nil && root == nil
            ? environment["APPD_HOST"].flatMap { $0.isEmpty ? nil : $0 } : nil
        guard let host = host ?? fromEnvironment else {
            self.init(socket: socket, root: root, environment: environment)
            return
        }
        if root != nil {
            throw AppdError(
                .badRequest, "--root names a local state root; it does not go with --host",
                hint: "put the remote socket in the URL: ssh://host/path/to/appd.sock")
        }
        var remote = try RemoteHost(parsing: host)
        if let socket {
            guard socket.hasPrefix("/"), !socket.contains("'"),
                !socket.contains(where: \.isWhitespace)
            else {
                throw AppdError(
                    .badRequest,
                    "--socket \(socket) is not an absolute path without spaces or quotes")
            }
            remote.socket = socket
        }
        if let appctl = environment["APPD_REMOTE_APPCTL"], !appctl.isEmpty {
            guard
                appctl.allSatisfy({
                    $0.isASCII && !$0.isWhitespace && $0 != "'" && $0 != ";" && $0 != "&"
                        && $0 != "|" && $0 != "$" && $0 != "`"
                })
            else {
                throw AppdError(.badRequest, "APPD_REMOTE_APPCTL=\(appctl) is not a plain path")
            }
            remote.remoteAppctl = appctl
        }
        self.init(socketPath: remote.description)
        self.remote = remote
    }

    /// The connection of one request: the local socket, or ssh to the remote one.
    func openConnection() throws -> UnixConnection {
        if let remote { return try remote.connect(timeout: timeout) }
        return try UnixConnection(path: socketPath, timeout: timeout)
    }

    /// `appctl system dial-stdio`: relays stdin to the daemon's socket and its answers to
    /// stdout until both directions end; what `--host` runs on the remote machine. Blocks
    /// without a timeout (a followed log or the event stream lasts as long as it lasts).
    public func dialStdio() throws(AppdError) {
        let connection: UnixConnection
        do {
            connection = try UnixConnection(path: socketPath, timeout: nil)
        } catch {
            throw connectFailure(error)
        }
        signal(SIGPIPE, SIG_IGN)
        var buffer = [UInt8](repeating: 0, count: 65536)
        var entries = [
            pollfd(fd: 0, events: Int16(POLLIN), revents: 0),
            pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0),
        ]
        var inputOpen = true
        while true {
            entries[0].fd = inputOpen ? 0 : -1
            if poll(&entries, 2, -1) < 0 {
                if errno == EINTR { continue }
                throw AppdError(.internal, "poll: \(errnoText(errno))")
            }
            if inputOpen, entries[0].revents != 0 {
                let count = retryingInterrupts { read(0, &buffer, buffer.count) }
                if count <= 0 {
                    inputOpen = false
                    shutdown(connection.fd, Int32(SHUT_WR))
                } else {
                    do {
                        try connection.write(Array(buffer[..<count]))
                    } catch {
                        return  // the daemon closed; what it said has been relayed
                    }
                }
            }
            if entries[1].revents != 0 {
                let count = retryingInterrupts { recv(connection.fd, &buffer, buffer.count, 0) }
                if count <= 0 { return }
                // The ssh side going away ends the relay.
                guard case .success = buffer[..<count].withUnsafeBytes({ writeAll(1, $0) }) else {
                    return
                }
            }
        }
    }
}
