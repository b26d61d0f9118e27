import AppdBase
import CLinux
import Glibc

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
