import AppBundle
import AppdBase
import Foundation
import Sandbox
import Supervisor
import Testing

/// Each entitlement appd knows (Entitlements.swift): the right is there when entitled, and absent when not.
@Suite("entitlements in a real sandbox", .serialized, rootOnly)
struct EntitlementTests {
    @Test(
        "network: none cannot reach the host's 127.0.0.1, nor client but on a LoopbackPorts= port; client can connect but not bind; server can bind"
    )
    func network() throws {
        let listener = try HostListener()
        let unlisted = try HostListener()
        let world = try SandboxWorld { $0.sandbox.loopbackPorts = [listener.port] }
        try world.install("com.example.none")
        try world.install(
            "com.example.client", entitlements: ["com.apple.security.network.client": .bool(true)])
        try world.install(
            "com.example.server", entitlements: ["com.apple.security.network.server": .bool(true)])
        let port = String(listener.port)

        let none = try world.launch("com.example.none", ["connect", "127.0.0.1", port])
        #expect(none.refused("connect"), "\(none)")
        let client = try world.launch("com.example.client", ["connect", "127.0.0.1", port])
        #expect(client.allowed("connect"), "\(client)")
        let notListed = try world.launch(
            "com.example.client", ["connect", "127.0.0.1", String(unlisted.port)])
        #expect(notListed.refused("connect"), "\(notListed)")
        let clientBind = try world.launch("com.example.client", ["bind", "0"])
        #expect(clientBind.refused("bind") || clientBind.refused("listen"), "\(clientBind)")
        let clientBindPort = try world.launch("com.example.client", ["bind", "47123"])
        #expect(clientBindPort.refused("bind"), "\(clientBindPort)")
        let server = try world.launch("com.example.server", ["bind", "47124"])
        #expect(server.allowed("bind") && server.allowed("listen"), "\(server)")
    }

    @Test("no app reaches a host abstract unix socket, with or without network")
    func abstractSockets() throws {
        let listener = try AbstractListener()
        let world = try SandboxWorld()
        try world.install("com.example.none")
        try world.install(
            "com.example.client", entitlements: ["com.apple.security.network.client": .bool(true)])
        for id in ["com.example.none", "com.example.client"] {
            let run = try world.launch(id, ["connect-abstract", listener.name])
            #expect(run.refused("connect-abstract"), "\(id): \(run)")
        }
    }

    @Test("application groups: two apps of a group share a container, a third cannot see it")
    func applicationGroups() throws {
        let world = try SandboxWorld()
        let group = "group.com.example.shared"
        try world.install(
            "com.example.writer",
            entitlements: ["com.apple.security.application-groups": .strings([group])],
            hostExecutables: ["/bin/sh"])
        try world.install(
            "com.example.reader",
            entitlements: ["com.apple.security.application-groups": .strings([group])],
            hostExecutables: ["/bin/sh", "/bin/cat"])
        try world.install("com.example.outsider")
        let writerProfile = try world.profile("com.example.writer")
        let container = try #require(
            writerProfile.mounts.first {
                $0.kind == .rwBind && $0.destination.contains("/AppGroup/")
            }?.destination)
        #expect(
            try world.profile("com.example.reader").mounts.contains { $0.destination == container })
        #expect(
            try !world.profile("com.example.outsider").mounts.contains {
                $0.destination == container
            })

        let file = "\(container)/note.txt"
        let write = try world.launch(
            "com.example.writer", ["exec", "/bin/sh", "-c", "echo shared > \(file)"])
        #expect(write.status == .exited(0), "\(write)")
        let read = try world.launch("com.example.reader", ["exec", "/bin/sh", "-c", "cat \(file)"])
        #expect(read.output == "shared\n", "\(read)")
        let outsider = try world.launch("com.example.outsider", ["read", file])
        #expect(outsider.refused("read"), "\(outsider)")
        let listing = try world.launch(
            "com.example.outsider", ["list", world.store.root.groupContainersPath])
        #expect(listing.value("list") == nil, "\(listing)")
    }

    @Test("temporary-exception paths are granted only where admin policy lists them")
    func exceptionPaths() throws {
        let base = "/var/tmp/appd-exception-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(
            atPath: "\(base)/allowed", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(
            atPath: "\(base)/other", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        try "ok".write(toFile: "\(base)/allowed/file.txt", atomically: false, encoding: .utf8)
        try "no".write(toFile: "\(base)/other/file.txt", atomically: false, encoding: .utf8)
        chmod(base, 0o755)
        let world = try SandboxWorld { $0.sandbox.allowedReadOnlyPaths = ["\(base)/allowed"] }
        let key = "com.apple.security.temporary-exception.files.absolute-path.read-only"
        try world.install(
            "com.example.reader",
            entitlements: [key: .strings(["\(base)/allowed", "\(base)/other"])])
        try world.install("com.example.plain")
        let granted = try world.launch("com.example.reader", ["read", "\(base)/allowed/file.txt"])
        #expect(granted.allowed("read"), "\(granted)")
        let write = try world.launch("com.example.reader", ["write", "\(base)/allowed/new.txt"])
        #expect(write.refused("write"), "\(write)")
        let notListed = try world.launch("com.example.reader", ["read", "\(base)/other/file.txt"])
        #expect(notListed.refused("read"), "\(notListed)")
        #expect(notListed.profile.entitlements.contains { $0.key == key && $0.outcome == .refused })
        let plain = try world.launch("com.example.plain", ["read", "\(base)/allowed/file.txt"])
        #expect(plain.refused("read"), "\(plain)")
    }

    @Test("cs.allow-jit permits writable+executable memory; without it, it is refused")
    func jit() throws {
        let world = try SandboxWorld()
        try world.install(
            "com.example.jit", entitlements: ["com.apple.security.cs.allow-jit": .bool(true)])
        try world.install("com.example.plain")
        #expect(try world.launch("com.example.jit", ["jit"]).allowed("mmap-wx"))
        #expect(try world.launch("com.example.plain", ["jit"]).refused("mmap-wx"))
    }

    @Test("cs.debugger permits ptrace of its own processes; without it, it is refused")
    func debugger() throws {
        let world = try SandboxWorld()
        try world.install(
            "com.example.debugger", entitlements: ["com.apple.security.cs.debugger": .bool(true)])
        try world.install("com.example.plain")
        let entitled = try world.launch("com.example.debugger", ["ptrace"])
        #expect(entitled.allowed("ptrace-attach"), "\(entitled)")
        #expect(try world.launch("com.example.plain", ["ptrace"]).refused("ptrace-attach"))
    }

    @Test("devices: camera, audio and usb entitlements bind the host's devices where present")
    func devices() throws {
        let world = try SandboxWorld()
        try world.install(
            "com.example.camera",
            entitlements: [
                "com.apple.security.device.camera": .bool(true),
                "com.apple.security.device.usb": .bool(true),
            ])
        try world.install("com.example.plain")
        let camera = try world.profile("com.example.camera")
        let plain = try world.profile("com.example.plain")
        let hostVideo = ((try? FileManager.default.contentsOfDirectory(atPath: "/dev")) ?? [])
            .filter { $0.hasPrefix("video") }.map { "/dev/\($0)" }
        #expect(
            Set(
                camera.mounts.filter {
                    $0.kind == .devBind && $0.destination.hasPrefix("/dev/video")
                }.map(\.destination)) == Set(hostVideo))
        #expect(!plain.mounts.contains { $0.kind == .devBind })
        let decision = try #require(
            camera.entitlements.first { $0.key == "com.apple.security.device.camera" })
        #expect(decision.outcome == .granted)
        if hostVideo.isEmpty { #expect(decision.effect.contains("no /dev/video")) }
        // /dev/bus/usb exists on most hosts: then the app sees it and the plain app does not.
        if FileManager.default.fileExists(atPath: "/dev/bus/usb") {
            let seen = try world.launch("com.example.camera", ["list", "/dev/bus/usb"])
            #expect(seen.value("list") != nil, "\(seen)")
            let unseen = try world.launch("com.example.plain", ["list", "/dev/bus/usb"])
            #expect(unseen.refused("list"), "\(unseen)")
        }
    }

    @Test("an app without com.apple.security.app-sandbox is refused unless policy allows it")
    func appSandboxRequired() throws {
        let world = try SandboxWorld()
        try world.install("com.example.bare", sandboxed: false)
        #expect(throws: AppdError.self) { try world.launch("com.example.bare", ["exit", "0"]) }
        let relaxed = try SandboxWorld { $0.sandbox.requireAppSandboxEntitlement = false }
        try relaxed.install("com.example.bare", sandboxed: false)
        let run = try relaxed.launch("com.example.bare", ["all"])
        #expect(run.value("status-Seccomp") == "2", "sandboxed anyway: \(run)")
    }
}
