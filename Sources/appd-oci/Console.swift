import AppdBase
import CLinux
import Glibc
import Sandbox

/// A terminal for a container (`process.terminal`): appd-oci opens a pseudo-terminal, gives
/// the app its terminal end as stdin, stdout and stderr, and sends the master end to the
/// engine over `--console-socket`, a Unix socket the engine listens on: one message, one
/// SCM_RIGHTS fd and a non-empty payload (runc's protocol, which the shim and conmon read).
struct Console {
    var master: Int32
    var terminal: Int32

    static func open() throws -> Console {
        var master: Int32 = -1
        var terminal: Int32 = -1
        guard appd_open_pty(&master, &terminal) == 0 else {
            throw AppdError.system("cannot open a pseudo-terminal")
        }
        return Console(master: master, terminal: terminal)
    }

    /// A plain container's terminal is also its `/dev/console`, as under runc: the host's
    /// pseudo-terminal end bound there (it is this container's alone), owned by the
    /// container's process user as a login's terminal is its user's.
    static func bind(
        _ console: Console, at path: String, owner map: SandboxProfile.UserNamespace,
        in profile: inout SandboxProfile
    ) throws {
        var buffer = [CChar](repeating: 0, count: 256)
        let count = readlink("/proc/self/fd/\(console.terminal)", &buffer, buffer.count - 1)
        let name =
            count > 0
            ? String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        guard name.hasPrefix("/dev/pts/"), !name.dropFirst(9).contains("/") else {
            throw AppdError(
                .unsupported, "the container's terminal is not a /dev/pts node (\(name))")
        }
        guard fchown(console.terminal, map.hostUID + profile.uid, map.hostGID + profile.gid) == 0
        else { throw AppdError.system("cannot give the terminal \(name) to the container") }
        profile.mounts.append(.devBind(name, at: path))
    }

    /// Sends the master end over the socket at `path` and closes it here.
    func send(to path: String) throws {
        defer { close(master) }
        let socket = Glibc.socket(
            AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socket >= 0 else { throw AppdError.system("cannot create a socket") }
        defer { close(socket) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw AppdError(.badRequest, "--console-socket \(path) is too long for a socket path")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            throw AppdError.system("cannot connect to the console socket \(path)")
        }
        var fds = [master]
        guard appd_send_fds(socket, UInt8(ascii: "p"), &fds, 1) == 0 else {
            throw AppdError.system("cannot send the terminal to \(path)")
        }
    }
}
