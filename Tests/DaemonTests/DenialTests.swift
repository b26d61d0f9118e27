import AppdAPI
import AppdClient
import Foundation
import Testing

/// Issue 16 §1: what the sandbox refused an app reaches the admin, named, once, per instance
/// (docs/denials.md). The denials come from a real sandboxed probe against a real daemon.
@Suite("the denial log", .serialized, rootOnly)
struct DenialTests {
    /// The instance has no denial, neither in its list (shown if not) nor in its count.
    func expectNoDenials(_ daemon: TestDaemon, instance: String) throws {
        let listed = try denials(daemon, instance: instance).denials
        #expect(
            listed.isEmpty,
            "\(listed.map { "\($0.source.rawValue) \($0.summary) pid \($0.pid ?? 0)" })")
        #expect(try daemon.instance(instance).denials == 0)
    }

    func denials(_ daemon: TestDaemon, instance: String) throws -> APIDenials {
        let result = try daemon.run("appctl", ["denials", "--json", instance])
        guard result.code == 0 else { throw DaemonFailure("appctl denials: \(result.output)") }
        return try APICoding.decoder().decode(APIDenials.self, from: Data(result.output.utf8))
    }

    @Test(
        "a probe's forbidden actions (list /, write /proc/self/comm, mount, ptrace, W+X mmap) each appear once, named, in appctl denials, in events and as the count in ps"
    )
    func probeDenials() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.denied")
        let watch = try EventWatch(daemon)
        // appctl denials -f: each new one as it is recorded.
        // It prints the kept ones first, so it misses none however late it starts.
        let follow = try DrainedChild(
            builtExecutable("appctl"),
            arguments: ["denials", "-f", "--json", "com.example.denied"],
            environment: ["APPD_ROOT=\(daemon.root)"])
        let probe = try daemon.launch("com.example.denied", ["denials", "3"])
        #expect(try daemon.eventually { try daemon.logs(probe.id).contains("thread:") })
        let log = try daemon.logs(probe.id)
        print("the probe: \(log)")
        for name in [
            "read-etc-shadow", "write-root", "list-root", "write-proc-comm", "mount",
            "ptrace-attach", "mmap-wx",
        ] {
            #expect(log.contains("\(name): refused"), "\(name): \(log)")
        }
        // Landlock: the directory and the file it may not list or write; seccomp: the three
        // system calls. (/etc/shadow is not in the sandbox and / is read-only: no layer
        // refused those, the file system did.)
        let expected: [(APIDenial.Source, String, String?)] = [
            (.landlock, "fs.read_dir", "/"), (.landlock, "fs.write_file", nil),
            (.seccomp, "mount", nil),
            (.seccomp, "ptrace", nil), (.seccomp, "mmap", nil),
        ]
        #expect(
            try daemon.eventually {
                try denials(daemon, instance: probe.id).denials.count >= expected.count
            })
        let answer = try denials(daemon, instance: probe.id)
        print(
            "denials of the probe: \(answer.denials.map { "\($0.source.rawValue) \($0.summary)" })")
        #expect(answer.kernelReports, "\(answer.reason ?? "")")
        for (source, what, path) in expected {
            let matching = answer.denials.filter {
                $0.source == source && $0.what == what && (path == nil || $0.path == path)
            }
            #expect(
                matching.count == 1,
                "\(source) \(what) \(path ?? ""): \(answer.denials.map(\.summary))")
            #expect(matching.first?.count == 1, "\(what) repeated: \(matching)")
            #expect(matching.first?.app == "com.example.denied")
            #expect(matching.first?.instance == probe.id)
        }
        #expect(log.contains("thread: allowed"), "\(log)")
        // Nothing else: clone3, refused with ENOSYS so that glibc's pthread_create falls back
        // to clone, is no denial.
        #expect(answer.denials.count == expected.count, "\(answer.denials.map(\.summary))")
        // The count in ps, its JSON, and the events.
        let instance = try daemon.instance(probe.id)
        #expect(instance.denials == answer.denials.count)
        let ps = try daemon.run("appctl", ["ps", "--all", probe.id])
        #expect(ps.output.contains("DENIED"), "\(ps.output)")
        let events = watch.stop(until: {
            $0.filter { $0.kind == .denial && $0.instance == probe.id }.count >= expected.count
        })
        .filter { $0.kind == .denial && $0.instance == probe.id }
        for (source, what, _) in expected {
            #expect(
                events.filter { $0.denial?.source == source && $0.denial?.what == what }.count == 1,
                "\(what) in events")
        }
        // The follower got the same, one JSON object a line.
        let lines = follow.stop { $0.split(separator: 0x0A).count >= answer.denials.count }.split(
            separator: 0x0A)
        let streamed = lines.compactMap {
            try? APICoding.decoder().decode(APIDenial.self, from: Data($0))
        }
        #expect(streamed.map(\.seq) == answer.denials.map(\.seq), "\(streamed.map(\.summary))")
        // The text form names them.
        let text = try daemon.run("appctl", ["denials", probe.id]).output
        #expect(text.contains("landlock  fs.read_dir / (openat)"), "\(text)")
        #expect(text.contains("seccomp   mount"), "\(text)")
    }

    @Test(
        "[Supervisor] DenialLog=no: the kernel's denials are neither asked for nor read, appd's own refusals still are, and the API says why"
    )
    func denialLogOff() throws {
        let daemon = try TestDaemon(
            config:
                "DenialLog=no\n[App com.example.revoked]\nRevokeEntitlements=com.apple.security.network.client\n"
        )
        try daemon.installProbe(
            "com.example.revoked",
            entitlements: "<key>com.apple.security.network.client</key><true/>")
        let probe = try daemon.launch("com.example.revoked", ["denials", "0"])
        _ = try daemon.wait(probe.id)
        usleep(500_000)
        let answer = try denials(daemon, instance: probe.id)
        #expect(!answer.kernelReports)
        #expect(answer.reason?.contains("DenialLog=no") == true, "\(answer.reason ?? "")")
        #expect(
            answer.denials.map(\.source) == [.appd],
            "\(answer.denials.map { "\($0.source.rawValue) \($0.summary)" })")
    }

    @Test(
        "a program that tries nothing forbidden has no denials: starting up in the sandbox is none")
    func quietApp() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.quiet")
        let quiet = try daemon.launch("com.example.quiet", ["exit", "4"])
        _ = try daemon.wait(quiet.id)
        usleep(500_000)
        try expectNoDenials(daemon, instance: quiet.id)
    }

    @Test(
        "two daemons on one host, an app of the same uid in each: each instance gets its own denials only (its audit session names it, not its uid)"
    )
    func twoDaemons() throws {
        let first = try TestDaemon()
        let second = try TestDaemon()
        try first.installProbe("com.example.loud")
        try second.installProbe("com.example.quiet")
        let quiet = try second.launch("com.example.quiet", ["sleep", "10"])
        // Quick processes: each forbidden call in a child that is gone when the record comes.
        let loud = try first.launch("com.example.loud", ["all"])
        _ = try first.wait(loud.id)
        print("uids: loud \(loud.uid), quiet \(quiet.uid)")
        #expect(try first.eventually { try denials(first, instance: loud.id).denials.count >= 10 })
        usleep(500_000)
        try expectNoDenials(second, instance: quiet.id)
    }

    @Test(
        "a network.client app's TCP bind is Landlock's net.bind_tcp, with its port; its UDP binds are the bind filter's, counted, with the last port"
    )
    func bindDenial() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe(
            "com.example.binder",
            entitlements: "<key>com.apple.security.network.client</key><true/>")
        let probe = try daemon.launch("com.example.binder", ["bind", "47123"])
        _ = try daemon.wait(probe.id)
        let output = try daemon.logs(probe.id)
        #expect(output.contains("bind: refused"), "\(output)")
        #expect(
            try daemon.eventually {
                try denials(daemon, instance: probe.id).denials.contains {
                    $0.what == "net.bind_tcp"
                }
            })
        let answer = try denials(daemon, instance: probe.id)
        print("denials of the binder: \(answer.denials.map(\.summary))")
        #expect(answer.denials.filter { $0.what == "net.bind_tcp" }.count == 1)
        #expect(
            answer.denials.allSatisfy { $0.source == .landlock }, "\(answer.denials.map(\.summary))"
        )

        // UDP: Landlock has no UDP rules; the cgroup bind filter refuses, and counts.
        let udp = try daemon.launch("com.example.binder", ["bind-udp", "47124"])
        _ = try daemon.wait(udp.id)
        let udpOutput = try daemon.logs(udp.id)
        #expect(udpOutput.contains("bind-udp: refused EPERM"), "\(udpOutput)")
        let filtered = try denials(daemon, instance: udp.id).denials.filter {
            $0.source == .bindFilter
        }
        print("bind filter: \(filtered.map(\.summary))")
        #expect(filtered.count == 1, "\(filtered.map(\.summary))")
        #expect(filtered.first?.what == "bind")
        #expect(filtered.first?.detail == "UDP port 47124")
        #expect(filtered.first?.count == 1)
        #expect(try daemon.instance(udp.id).denials == 1)
    }

    @Test(
        "appd's own refusals: a launch of a tampered bundle, and an entitlement [App ID] RevokeEntitlements= took away"
    )
    func appdRefusals() throws {
        let daemon = try TestDaemon(
            config:
                "[App com.example.revoked]\nRevokeEntitlements=com.apple.security.network.client\n")
        try daemon.installProbe(
            "com.example.revoked",
            entitlements: "<key>com.apple.security.network.client</key><true/>")
        let revoked = try daemon.launch("com.example.revoked", ["exit", "0"])
        _ = try daemon.wait(revoked.id)
        let answer = try denials(daemon, instance: revoked.id)
        #expect(
            answer.denials.contains {
                $0.source == .appd && $0.what == "entitlement"
                    && ($0.detail ?? "").contains("com.apple.security.network.client")
            }, "\(answer.denials.map(\.summary))")

        try daemon.installProbe("com.example.tampered")
        let bundle = try daemon.client.get(
            "/v1/apps/com.example.tampered/containers/bundle", as: APIContainer.self)
        let handle = try #require(FileHandle(forWritingAtPath: "\(bundle.path)/Probe"))
        handle.seekToEndOfFile()
        handle.write(Data([0]))
        handle.closeFile()
        let launch = try daemon.run("appctl", ["launch", "com.example.tampered"])
        #expect(launch.code != 0, "\(launch.output)")
        let result = try daemon.run("appctl", ["denials", "--json", "com.example.tampered"])
        let refusals = try APICoding.decoder().decode(
            APIDenials.self, from: Data(result.output.utf8))
        let launchDenials = refusals.denials.filter { $0.source == .appd && $0.what == "launch" }
        #expect(launchDenials.count == 1, "\(refusals.denials.map(\.summary))")
        #expect((launchDenials.first?.detail ?? "").contains("changed after it was installed"))
        #expect(launchDenials.first?.instance == nil)
    }

    @Test(
        "an app that generates denials in a tight loop cannot flood the daemon: rate-limited, dropped counted, at most 128 kept, the API answers, memory bounded"
    )
    func flood() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.flood")
        let before = daemon.residentKiB
        let root = Responsiveness(daemon)
        let flood = try daemon.launch("com.example.flood", ["deny-loop", "6"])
        _ = try daemon.wait(flood.id)
        root.expectResponsive("denial flood")
        let log = try daemon.logs(flood.id)
        print("flood: \(log.split(separator: "\n").last ?? "")")
        #expect(try daemon.eventually { try daemon.instance(flood.id).denialsDropped ?? 0 > 0 })
        let answer = try denials(daemon, instance: flood.id)
        let instance = try daemon.instance(flood.id)
        print(
            "flood: \(instance.denials ?? 0) denials seen, \(answer.denials.count) kept, \(answer.dropped) dropped; daemon RSS \(before) -> \(daemon.residentKiB) KiB"
        )
        #expect(answer.denials.count <= 128)
        #expect(answer.dropped > 0)
        // The kernel's backlog may still be draining after the app ended: the two views agree
        // once the reader has caught up.
        #expect(
            try daemon.eventually {
                try denials(daemon, instance: flood.id).dropped
                    == daemon.instance(flood.id).denialsDropped
            })
        // 20 at once and 5 a second over the flood's 6 s, with slack for the refill.
        #expect(answer.denials.count <= 20 + 5 * 10)
        #expect(
            daemon.residentKiB - before < 64 << 10,
            "the daemon grew by \(daemon.residentKiB - before) KiB")
    }
}
