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

extension AppdClient {
    /// Why nobody answered, in the words of the person who has to fix it.
    func connectFailure(_ error: TransportError) -> AppdError {
        switch error {
        case .connect(let code) where code == ENOENT || code == ECONNREFUSED || code == ENOTDIR:
            // ECONNREFUSED: the socket file is there but its daemon is gone (a crash, or a
            // stopped appd.service without its socket unit).
            return AppdError(
                .unavailable, "appd is not running (no daemon listening on \(socketPath))",
                errno: code, hint: Self.notRunningHint(socketSource)
            )
        case .connect(let code) where code == EACCES || code == EPERM:
            return permissionFailure(code)
        case .connect(let code):
            return AppdError(
                .unavailable, "cannot connect to appd at \(socketPath): \(errnoText(code))",
                errno: code)
        case .pathTooLong(let bytes, let limit):
            return AppdError(
                .unavailable,
                "the socket path \(socketPath) is too long (\(bytes) bytes; a Unix socket path holds at most \(limit))",
                hint: "use a shorter --socket or --root path")
        case .socket(let code):
            return AppdError(
                .unavailable, "cannot create a socket: \(errnoText(code))",
                errno: code)
        case .read, .write, .timedOut:
            return AppdError(.unavailable, "cannot talk to appd at \(socketPath): \(error)")
        }
    }

    /// Where the path came from and what else to try: a wrong --socket or APPD_SOCKET is as
    /// likely as a daemon that is down.
    static func notRunningHint(_ source: APISocket.Source?) -> String {
        let start = "start it: systemctl start appd.socket, or appd serve --root DIR"
        switch source {
        case nil:
            return start
        case .flag:
            return
                "the path is the one --socket gave; without --socket, APPD_SOCKET or --root name the daemon; or \(start)"
        case .environment:
            return
                "the path is APPD_SOCKET's: if that daemon is gone, unset APPD_SOCKET (or give --socket or --root); or \(start)"
        case .root(let root, let via, let record, let recorded):
            let startRoot = "start it: appd serve --root \(root)"
            guard let via else {
                return recorded
                    ? "the path is the one the system's daemon recorded in \(record) when it started; \(start); or name another daemon with --socket, APPD_SOCKET or --root"
                    : "the path is the default (no daemon recorded another in \(record)); \(start); or name another daemon with --socket, APPD_SOCKET or --root"
            }
            return recorded
                ? "the path is the one the daemon of \(root) (from \(via)) recorded in \(record) when it started: it is not running any more; \(startRoot)"
                : "the path is the default of \(root) (from \(via)): no daemon of it recorded another in \(record); \(startRoot), or name the daemon's socket with --socket or APPD_SOCKET"
        }
    }

    /// EACCES on connect: no write permission on the socket, or no search permission on a
    /// directory above it. The socket's group is the one to be in.
    private func permissionFailure(_ code: Int32) -> AppdError {
        var info = stat()
        guard stat(socketPath, &info) == 0 else {
            return AppdError(
                .unavailable,
                "permission denied on the socket \(socketPath) (or a directory above it)",
                errno: code,
                hint: "you need to be in the group that owns it; ask an admin, or use sudo")
        }
        let group = Self.groupName(info.st_gid)
        let mode = String(info.st_mode & 0o777, radix: 8)
        if info.st_gid == 0 {
            // Joining root's group would give far more than the socket: say what to change.
            return AppdError(
                .unavailable,
                "permission denied on the socket \(socketPath) (group \(group), mode 0\(mode)): only root may connect",
                errno: code,
                hint:
                    "an admin can open it to a group with SocketGroup= in [API] of appd.conf (e.g. SocketGroup=appd, then usermod -aG appd \(Self.userName())); or use sudo"
            )
        }
        return AppdError(
            .unavailable,
            "permission denied on the socket \(socketPath) (group \(group), mode 0\(mode)): you need to be in the group that owns it",
            errno: code,
            hint:
                "ask an admin to add you: usermod -aG \(group) \(Self.userName()), then log in again; or use sudo"
        )
    }

    static func groupName(_ gid: gid_t) -> String {
        var group = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getgrgid_r(gid, &group, &buffer, buffer.count, &result) == 0, result != nil,
            let name = group.gr_name
        else {
            return "\(gid)"
        }
        return String(cString: name)
    }

    static func userName() -> String {
        var user = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(getuid(), &user, &buffer, buffer.count, &result) == 0, result != nil,
            let name = user.pw_name
        else {
            return "$USER"
        }
        return String(cString: name)
    }

    /// A non-2xx answer: the daemon's `AppdError` when the body is one, else an error that says
    /// what came back (a proxy's HTML, a half-written body).
    func answerError(_ head: HTTPResponseHead, body: Data?, request: HTTPRequest) -> AppdError {
        if let body, let decoded = try? APICoding.decoder().decode(APIErrorBody.self, from: body) {
            return decoded.error
        }
        let text = body.map { String(decoding: $0.prefix(4096), as: UTF8.self) } ?? ""
        let firstLine =
            text.split(whereSeparator: \.isNewline).first.map { $0.trimmingBlanks() } ?? ""
        var message = "appd answered \(request.summary) with \(head.status)"
        if !head.reason.isEmpty { message += " \(HTTPResponseReader.printable(head.reason))" }
        if !firstLine.isEmpty {
            message += ": \(HTTPResponseReader.printable(firstLine, limit: 200))"
        }
        return AppdError(AppdError.Code(status: head.status), message)
    }

    /// A decoding error as a path to the bad field, not Foundation's debug dump.
    static func describe(decoding error: Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map {
                $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)"
            }.joined()
            return keys.isEmpty ? "the top level" : String(keys.drop { $0 == "." })
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\(path(context)): missing '\(key.stringValue)'"
        case .typeMismatch(_, let context), .valueNotFound(_, let context),
            .dataCorrupted(let context):
            return "\(path(context)): \(context.debugDescription)"
        @unknown default: return "\(error)"
        }
    }
}
