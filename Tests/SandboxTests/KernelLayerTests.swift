import AppBundle
import AppdBase
import Foundation
import Sandbox
import Testing

@testable import AppdConfig

/// Kernels without every Landlock feature (issue 14 §4, docs/sandbox-layers.md): the policy at
/// Landlock ABI 2 (Debian 12's 6.1), 4 (6.7) and 6 (6.12), without root.
@Suite("sandbox policy on kernels with fewer Landlock features")
struct KernelLayerPolicyTests {
    static let client: [String: PlistValue] = ["com.apple.security.network.client": .bool(true)]
    static let server: [String: PlistValue] = ["com.apple.security.network.server": .bool(true)]

    static func kernel(_ abi: Int, seccomp: Bool = true) -> KernelLayers {
        KernelLayers(landlockABI: abi, seccomp: seccomp)
    }

    static func unixRules(_ profile: SandboxProfile) -> [SeccompRule] {
        profile.seccomp.rules.filter {
            ($0.syscall == "socket" || $0.syscall == "socketpair") && $0.reason.contains("scoping")
        }
    }

    @Test(
        "ABI 2: network.client launches; seccomp refuses listen and unix sockets; both gaps shown as reduced"
    )
    func abi2() throws {
        let client = try PolicyTests.profile(Self.client, kernel: Self.kernel(2))
        #expect(client.weakenedLayers.isEmpty)
        #expect(client.landlock.minimumABI == 1)
        #expect(client.landlock.restrictedTCP.isEmpty && client.landlock.scopes.isEmpty)
        #expect(client.seccomp.rules.contains { $0.syscall == "listen" })
        #expect(Self.unixRules(client).count == 4)
        #expect(client.reducedLayers.count == 2)
        #expect(
            client.reducedLayers.contains { $0.contains("no TCP rules") && $0.contains("listen()") }
        )
        #expect(
            client.reducedLayers.contains {
                $0.contains("no scoping") && $0.contains("stream socketpairs")
            })

        let server = try PolicyTests.profile(Self.server, kernel: Self.kernel(2))
        #expect(server.reducedLayers.count == 1 && server.reducedLayers[0].contains("no scoping"))
        #expect(!server.seccomp.rules.contains { $0.syscall == "listen" })
        #expect(Self.unixRules(server).count == 4)

        // No network: the private namespace isolates TCP and abstract sockets; nothing reduced.
        let none = try PolicyTests.profile(kernel: Self.kernel(2))
        #expect(none.reducedLayers.isEmpty && none.weakenedLayers.isEmpty)
        #expect(Self.unixRules(none).isEmpty)
        #expect(none.landlock.restrictedTCP.isEmpty)
    }

    @Test("ABI 4: TCP bind denied by Landlock; only scoping is reduced")
    func abi4() throws {
        let client = try PolicyTests.profile(Self.client, kernel: Self.kernel(4))
        #expect(client.landlock.restrictedTCP == [.bind])
        #expect(client.landlock.minimumABI == 4)
        #expect(client.reducedLayers.count == 1 && client.reducedLayers[0].contains("no scoping"))
        #expect(Self.unixRules(client).count == 4)
        let none = try PolicyTests.profile(kernel: Self.kernel(4))
        #expect(none.landlock.restrictedTCP == [.bind, .connect])
        #expect(none.reducedLayers.isEmpty)
    }

    @Test("ABI 6 and 7: every layer; unix sockets allowed, Landlock scopes them")
    func abi6() throws {
        for abi in [6, 7] {
            let client = try PolicyTests.profile(Self.client, kernel: Self.kernel(abi))
            #expect(client.reducedLayers.isEmpty && client.weakenedLayers.isEmpty)
            #expect(client.landlock.scopes == [.abstractUnix, .signal])
            #expect(client.landlock.minimumABI == 6)
            #expect(Self.unixRules(client).isEmpty)
        }
    }

    @Test("without seccomp nothing closes the gaps: refused, each naming its one switch")
    func noSeccomp() throws {
        let error = try #require(throws: AppdError.self) {
            try PolicyTests.profile(Self.client, kernel: Self.kernel(2, seccomp: false)) {
                $0.weakerModes = [.noSeccomp]
            }
        }
        #expect(error.code == .unsupported)
        #expect(error.description.contains("WeakerModes=no-landlock-network"))
        let scopes = try #require(throws: AppdError.self) {
            try PolicyTests.profile(Self.server, kernel: Self.kernel(2, seccomp: false)) {
                $0.weakerModes = [.noSeccomp]
            }
        }
        #expect(scopes.description.contains("WeakerModes=no-landlock-scopes"))
        let accepted = try PolicyTests.profile(Self.client, kernel: Self.kernel(2, seccomp: false))
        {
            $0.weakerModes = [.noSeccomp, .noLandlockNetwork, .noLandlockScopes]
        }
        #expect(accepted.weakenedLayers.count == 3)
        #expect(accepted.reducedLayers.isEmpty)
    }

    @Test("doctor's summary: per kind of app, launches or refused, with the reduced layers")
    func summary() {
        let abi2 = SandboxPolicy(settings: SandboxSettings(), kernel: Self.kernel(2))
            .kernelSummary()
        #expect(abi2.map(\.apps) == ["no network", "network.client", "network.server"])
        #expect(abi2.allSatisfy { $0.launches })
        #expect(abi2[0].notes.isEmpty)
        #expect(abi2[1].notes.count == 2 && abi2[1].notes.allSatisfy { $0.hasPrefix("reduced: ") })
        #expect(abi2[2].notes.count == 1)
        let full = SandboxPolicy(settings: SandboxSettings(), kernel: Self.kernel(7))
            .kernelSummary()
        #expect(full.allSatisfy { $0.launches && $0.notes.isEmpty })
        let none = SandboxPolicy(settings: SandboxSettings(), kernel: Self.kernel(0))
            .kernelSummary()
        #expect(none.allSatisfy { !$0.launches && $0.notes[0].contains("no-landlock") })
    }
}

/// The same decisions from a real sandboxed app: its profile compiled as for an older kernel
/// (the launcher applies exactly what a profile says, so an ABI-2 profile on this kernel has no
/// TCP rules and no scoping), attacked from inside.
@Suite("kernels with fewer Landlock features, from a real sandboxed app", .serialized, rootOnly)
struct KernelLayerLaunchTests {
    static let abi2 = KernelLayers(landlockABI: 2, seccomp: true)

    @Test(
        "ABI 2 network.client: connects; cannot bind a TCP port nor listen; no unix socket but a stream pair"
    )
    func clientOnABI2() throws {
        // A host service the admin lets apps reach (the loopback guard refuses the others).
        let host = try HostListener()
        let world = try SandboxWorld { $0.sandbox.loopbackPorts = [host.port] }
        try world.install(
            "com.example.client", entitlements: ["com.apple.security.network.client": .bool(true)])
        let connect = try world.launch(
            "com.example.client", ["connect", "127.0.0.1", "\(host.port)"], kernel: Self.abi2)
        #expect(connect.allowed("connect"), "\(connect)")
        // No Landlock TCP rule in this profile: the cgroup filter refuses the bind, and without
        // it seccomp still refuses listen().
        let bind = try world.launch("com.example.client", ["bind", "47131"], kernel: Self.abi2)
        #expect(bind["bind"] == "refused EPERM", "\(bind)")
        let unfiltered = try world.launch(
            "com.example.client", ["bind", "47131"], kernel: Self.abi2
        ) {
            $0.denyPortBinds = false
        }
        #expect(
            unfiltered.allowed("bind") && unfiltered["listen"] == "refused EPERM", "\(unfiltered)")
        let ephemeral = try world.launch("com.example.client", ["bind", "0"], kernel: Self.abi2)
        #expect(ephemeral.allowed("bind") && ephemeral["listen"] == "refused EPERM", "\(ephemeral)")
        let unix = try world.launch("com.example.client", ["unix-socket"], kernel: Self.abi2)
        #expect(unix["unix-socket"] == "refused EPERM", "\(unix)")
        let stream = try world.launch(
            "com.example.client", ["socketpair-stream"], kernel: Self.abi2)
        #expect(stream.allowed("socketpair-stream"), "\(stream)")
        let abstract = try AbstractListener()
        let reach = try world.launch(
            "com.example.client", ["connect-abstract", abstract.name], kernel: Self.abi2)
        #expect(reach.refused("connect-abstract"), "\(reach)")
    }

    @Test(
        "ABI 2: a datagram socketpair could send to the host's abstract sockets; seccomp refuses it"
    )
    func datagramPairOnABI2() throws {
        let world = try SandboxWorld()
        try world.install(
            "com.example.client", entitlements: ["com.apple.security.network.client": .bool(true)])
        try world.install(
            "com.example.server", entitlements: ["com.apple.security.network.server": .bool(true)])
        let inbox = try AbstractDatagramInbox()
        for id in ["com.example.client", "com.example.server"] {
            let run = try world.launch(id, ["socketpair-dgram", inbox.name], kernel: Self.abi2)
            #expect(run["socketpair-dgram"] == "refused EPERM", "\(id): \(run)")
        }
        #expect(inbox.received() == nil)
        // The gap is real: without those rules (what ABI 2 alone gives) the datagram arrives.
        let open = try world.launch(
            "com.example.client", ["socketpair-dgram", inbox.name], kernel: Self.abi2
        ) {
            $0.seccomp.rules.removeAll { $0.reason.contains("scoping") }
        }
        #expect(open.allowed("sendto-abstract"), "\(open)")
        #expect(inbox.received() == "hello from the app")
    }

    @Test("this kernel (ABI >= 6): Landlock scopes instead; unix sockets of its own are allowed")
    func clientWithScoping() throws {
        try #require(KernelLayers.detect().landlockABI >= 6, "needs a kernel with Landlock ABI 6")
        let world = try SandboxWorld()
        try world.install(
            "com.example.client", entitlements: ["com.apple.security.network.client": .bool(true)])
        let unix = try world.launch("com.example.client", ["unix-socket"])
        #expect(unix.allowed("unix-socket"), "\(unix)")
        let inbox = try AbstractDatagramInbox()
        let run = try world.launch("com.example.client", ["socketpair-dgram", inbox.name])
        #expect(run.allowed("socketpair-dgram") && run.refused("sendto-abstract"), "\(run)")
        #expect(inbox.received() == nil)
    }

    /// Linux 6.1 as far as code goes: no PR_SET_MDWE, no vm.memfd_noexec.
    static let noMDWE: KernelLayers = {
        var kernel = KernelLayers.detect()
        kernel.mdwe = false
        kernel.memfdNoexec = false
        return kernel
    }()

    @Test(
        "without PR_SET_MDWE (before 6.3): seccomp stands in, RW->RX and the other ways to run written code are refused, and a Swift Foundation app and the dynamically linked probe still run"
    )
    func codeWithoutMDWE() throws {
        let world = try SandboxWorld()
        try world.install("com.example.probe")
        let run = try world.launch("com.example.probe", ["code"], kernel: Self.noMDWE)
        #expect(run.status == .exited(0), "\(run)")
        #expect(!run.profile.refuseExecGain && !run.profile.memfdNoexec)
        #expect(run.value("code-mdwe") == "0", "the launcher set no MDWE: \(run)")
        #expect(run["code-mprotect-rx"] == "refused EACCES", "\(run)")
        for name in [
            "code-shared-anon-rx", "code-memfd-create", "code-memfd-mmap-rx", "code-memfd-execveat",
            "code-home-mmap-exec", "code-tmp-exec",
        ] {
            #expect(run.refused(name), "\(name): \(run[name] ?? "missing")")
        }
        // And without the stand-in the same profile lets the page become code: the gap is real.
        let open = try world.launch("com.example.probe", ["code"], kernel: Self.noMDWE) { profile in
            profile.seccomp.rules.removeAll { $0.reason.contains("PR_SET_MDWE") }
        }
        #expect(open["code-mprotect-rx"] == "allowed", "\(open)")

        try world.installHello(
            "com.example.hello", entitlements: ["com.apple.security.network.client": .bool(true)])
        let hello = try world.launch("com.example.hello", ["x"], kernel: Self.noMDWE)
        #expect(hello.status == .exited(0), "\(hello)")
        #expect(hello.output.contains("process:   child says hi"), "\(hello)")
    }
}

/// A bound abstract datagram socket on the host, closed on deinit.
final class AbstractDatagramInbox {
    let fd: Int32
    let name = "appd-test-dgram-\(UUID().uuidString.prefix(8))"

    init() throws {
        guard let address = UnixAddress(name, abstract: true) else {
            throw AppdError.system("abstract name")
        }
        fd = try boundUnixSocket(SOCK_DGRAM, address)
    }

    /// The first datagram waiting, if any.
    func received() -> String? {
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : nil
    }

    deinit { close(fd) }
}
