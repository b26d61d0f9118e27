import AppBundle
import AppdBase
import Foundation
import Sandbox
import Testing

/// Issue 13 §7 (docs/sandbox-layers.md, "Network-entitled apps"): UDP binds are refused to
/// network.client apps by a cgroup filter; the host's /proc/net stays visible to apps on the
/// host network (documented), which the second test pins down so a change either way is seen.
@Suite("network-entitled apps: UDP binds and /proc/net", .serialized, rootOnly)
struct NetworkVisibilityTests {
    @Test(
        "UDP: a network.client app cannot bind a port (the cgroup filter), only port 0; a network.server app can, and receives"
    )
    func udpBind() throws {
        let world = try SandboxWorld()
        try world.install(
            "com.example.client", entitlements: ["com.apple.security.network.client": .bool(true)])
        try world.install(
            "com.example.server", entitlements: ["com.apple.security.network.server": .bool(true)])
        let port: UInt16 = 47141
        let sender = DatagramSender(port: port)
        defer { sender.stop() }
        let client = try world.launch("com.example.client", ["bind-udp", "\(port)"])
        #expect(client["bind-udp"] == "refused EPERM", "\(client)")
        #expect(client.profile.denyPortBinds)
        let ephemeral = try world.launch("com.example.client", ["bind-udp", "0"])
        #expect(ephemeral.allowed("bind-udp"), "\(ephemeral)")
        let server = try world.launch("com.example.server", ["bind-udp", "\(port)"])
        #expect(server.allowed("bind-udp") && server.value("udp-received") == "ping", "\(server)")
        // The gap is real: Landlock has no UDP rules, so without the filter a client app is a
        // UDP server.
        let unfiltered = try world.launch("com.example.client", ["bind-udp", "\(port)"]) {
            $0.denyPortBinds = false
        }
        #expect(
            unfiltered.allowed("bind-udp") && unfiltered.value("udp-received") == "ping",
            "\(unfiltered)")
    }

    @Test(
        "/proc/net: a network.client app sees the host's unix sockets and TCP listeners; an app without network sees none"
    )
    func procNet() throws {
        let world = try SandboxWorld()
        try world.install(
            "com.example.client", entitlements: ["com.apple.security.network.client": .bool(true)])
        try world.install("com.example.offline")
        let socketPath = "/tmp/appd-procnet-\(UUID().uuidString.prefix(8)).sock"
        let unixListener = try PathListener(path: socketPath)
        let tcp = try HostListener()
        let port = ":" + String(format: "%04X", tcp.port) + " "
        for (id, visible) in [("com.example.client", "yes"), ("com.example.offline", "no")] {
            let unix = try world.launch(id, ["proc-net", "unix", socketPath])
            #expect(
                unix.allowed("proc-net") && unix.value("proc-net-found") == visible,
                "\(id): \(unix)")
            let listeners = try world.launch(id, ["proc-net", "tcp", port])
            #expect(listeners.value("proc-net-found") == visible, "\(id): \(listeners)")
        }
        withExtendedLifetime(unixListener) {}
    }
}

/// Sends "ping" to 127.0.0.1:port every 50 ms from a thread of its own until stopped.
final class DatagramSender: @unchecked Sendable {
    private let lock = NSLock()
    private var stopped = false

    init(port: UInt16) {
        Thread.detachNewThread { [self] in
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            while !lock.withLock({ stopped }) {
                _ = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        sendto(fd, "ping", 4, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
                usleep(50_000)
            }
        }
    }

    func stop() { lock.withLock { stopped = true } }
}

/// A listening unix socket at a path on the host, removed on deinit.
final class PathListener {
    let fd: Int32
    let path: String

    init(path: String) throws {
        self.path = path
        guard let address = UnixAddress(path) else { throw AppdError.system("socket path \(path)") }
        fd = try boundUnixSocket(SOCK_STREAM, address)
        guard listen(fd, 4) == 0 else { throw AppdError.system("listen \(path)") }
    }

    deinit {
        close(fd)
        unlink(path)
    }
}
