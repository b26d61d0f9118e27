import AppdAPI
import Foundation
import Testing

/// Issue 24 §3: the host's loopback is not the network. Real sandboxed probes on the host's
/// network (network.client, network.server) launched by a real daemon try the host's services
/// on 127.0.0.1 and another app's listener; only the ports `LoopbackPorts=` allows, and their
/// own sockets, are reachable, and each refusal is in `appctl denials`.
@Suite("the host's loopback", .serialized, rootOnly)
struct LoopbackTests {
    /// The probe's lines of one launch, by name (`allowed`, `refused ERRNO`, `value X`).
    func outcomes(_ daemon: TestDaemon, _ id: String, _ arguments: [String]) throws -> (
        instance: String, lines: [String: String]
    ) {
        let instance = try daemon.launch(id, arguments)
        _ = try daemon.wait(instance.id)
        let log = try daemon.logs(instance.id)
        print("\(id) \(arguments.joined(separator: " ")): \(log)")
        var lines: [String: String] = [:]
        for line in log.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { continue }
            lines[String(parts[0])] = parts[1].trimmingCharacters(in: .whitespaces)
        }
        return (instance.id, lines)
    }

    func denials(_ daemon: TestDaemon, instance: String) throws -> [APIDenial] {
        let result = try daemon.run("appctl", ["denials", "--json", instance])
        guard result.code == 0 else { throw DaemonFailure("appctl denials: \(result.output)") }
        return try APICoding.decoder().decode(APIDenials.self, from: Data(result.output.utf8))
            .denials
    }

    @Test(
        "a network app reaches neither a host service on 127.0.0.1 (nor by 127.0.0.2, 0.0.0.0, ::ffff:127.0.0.1, UDP) nor another app's listener; an allowed port and its own sockets it does; refusals are in appctl denials"
    )
    func loopbackGuard() throws {
        let hostService = try HostListener()
        let allowed = try HostListener()
        let granted = try HostListener()
        let daemon = try TestDaemon(
            config:
                "[Sandbox]\nLoopbackPorts=\(allowed.port)\n[App com.example.granted]\nLoopbackPorts=\(granted.port)\n"
        )
        let client = "<key>com.apple.security.network.client</key><true/>"
        try daemon.installProbe("com.example.client", entitlements: client)
        try daemon.installProbe("com.example.granted", entitlements: client)
        try daemon.installProbe(
            "com.example.server",
            entitlements: "<key>com.apple.security.network.server</key><true/>")
        try daemon.installProbe("com.example.offline")

        // The host's service, every way of spelling its loopback address.
        let attempt = try outcomes(
            daemon, "com.example.client", ["loopback", String(hostService.port)])
        for name in [
            "loopback-tcp4", "loopback-alias", "loopback-any", "loopback-mapped", "loopback-udp",
        ] {
            #expect(
                attempt.lines[name] == "refused EPERM",
                "\(name): \(attempt.lines[name] ?? "missing")")
        }
        // Its own sockets on lo still work: Foundation's CFSocket wakes its threads this way (a
        // network.client app cannot listen at all: own-tcp is for the server below).
        #expect(attempt.lines["own-udp-pair"] == "allowed")
        #expect(
            try daemon.eventually {
                try denials(daemon, instance: attempt.instance).contains {
                    $0.source == .loopbackFilter && $0.what == "connect"
                        && ($0.detail ?? "").contains("port \(hostService.port)")
                }
            }, "\((try? denials(daemon, instance: attempt.instance)) ?? [])")
        let text = try daemon.run("appctl", ["denials", attempt.instance])
        #expect(text.output.contains("loopback-filter"), "\(text.output)")

        // Another app's listener on 127.0.0.1.
        let server = try daemon.launch("com.example.server", ["serve", "0", "30"])
        var serverPort = ""
        #expect(
            try daemon.eventually {
                let log = try daemon.logs(server.id)
                guard
                    let line = log.split(separator: "\n").first(where: {
                        $0.hasPrefix("serve-port: value ")
                    })
                else { return false }
                serverPort = String(line.dropFirst("serve-port: value ".count))
                return true
            })
        let toServer = try outcomes(
            daemon, "com.example.client", ["connect", "127.0.0.1", serverPort])
        #expect(toServer.lines["connect"] == "refused EPERM", "\(toServer.lines)")
        // network.server apps are guarded too; their own listener they reach.
        let serverAttempt = try outcomes(
            daemon, "com.example.server", ["loopback", String(hostService.port)])
        #expect(serverAttempt.lines["loopback-tcp4"] == "refused EPERM", "\(serverAttempt.lines)")
        #expect(serverAttempt.lines["own-tcp"] == "allowed", "\(serverAttempt.lines)")
        #expect(serverAttempt.lines["own-udp-pair"] == "allowed", "\(serverAttempt.lines)")
        let fromServer = try outcomes(
            daemon, "com.example.server", ["connect", "127.0.0.1", String(hostService.port)])
        #expect(fromServer.lines["connect"] == "refused EPERM", "\(fromServer.lines)")
        _ = try daemon.client.post("/v1/instances/\(server.id)/kill", as: APIInstance.self)

        // The admin's ports: [Sandbox] for every app, [App ID] for one.
        let allowedPort = try outcomes(
            daemon, "com.example.client", ["connect", "127.0.0.1", String(allowed.port)])
        #expect(allowedPort.lines["connect"] == "allowed", "\(allowedPort.lines)")
        let notGranted = try outcomes(
            daemon, "com.example.client", ["connect", "127.0.0.1", String(granted.port)])
        #expect(notGranted.lines["connect"] == "refused EPERM", "\(notGranted.lines)")
        let grantedPort = try outcomes(
            daemon, "com.example.granted", ["connect", "127.0.0.1", String(granted.port)])
        #expect(grantedPort.lines["connect"] == "allowed", "\(grantedPort.lines)")

        // An app without a network entitlement has a lo of its own, unguarded: UDP to any port of
        // it goes (nothing of the host's is there), its own pair works; TCP is Landlock's
        // (no bind or connect at all: EACCES, not the guard's EPERM).
        let offline = try outcomes(
            daemon, "com.example.offline", ["loopback", String(hostService.port)])
        #expect(offline.lines["loopback-udp"] == "allowed", "\(offline.lines)")
        #expect(offline.lines["own-udp-pair"] == "allowed", "\(offline.lines)")
        #expect(offline.lines["loopback-tcp4"] == "refused EACCES", "\(offline.lines)")
    }
}
