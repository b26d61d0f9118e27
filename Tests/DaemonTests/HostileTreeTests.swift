import AppdAPI
import AppdClient
import Foundation
import Testing

/// Attacks through the files of an app's data container (issue 13 §3), from a real sandboxed
/// Probe against a real daemon: a tree no recursive walk survives, and leftovers that cannot be
/// removed at all, which must never block a later install, uninstall or launch.
@Suite("hostile trees in the data container", .serialized, rootOnly)
struct HostileTreeTests {
    static func entries(_ path: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }

    /// `chattr +i` / `-i`: a file even root cannot unlink, as a stand-in for whatever makes a
    /// removal fail on a real host (an immutable attribute, a mount, an I/O error).
    static func chattr(_ flag: String, _ path: String) throws {
        let result = try TestDaemon.run("/usr/bin/chattr", [flag, path])
        guard result.code == 0 else {
            throw DaemonFailure("chattr \(flag) \(path): \(result.output)")
        }
    }

    @Test(
        "an app's 20,000-level tree with FIFOs, sockets, symlinks and mode-000 entries: uninstall succeeds, the daemon lives, installs go on"
    )
    func deepTree() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.deep")
        let data = try daemon.client.get(
            "/v1/apps/com.example.deep/containers/data", as: APIContainer.self
        ).path
        let made = try daemon.launch("com.example.deep", ["deep-tree", "20000"])
        // Landlock checks each mkdir against the whole path up: the app's own tree takes it a while.
        let ended = try AppdClient(socketPath: daemon.socket, timeout: 600)
            .get("/v1/instances/\(made.id)/wait", as: APIInstance.self)
        #expect(ended.exit?.code == 0)
        let output = try daemon.logs(made.id)
        #expect(output.contains("deep-tree: value 20000"), "\(output)")

        let start = Date()
        let uninstall = try daemon.run("appd", ["uninstall", "com.example.deep"])
        #expect(uninstall.code == 0, "\(uninstall.output)")
        #expect(Date().timeIntervalSince(start) < 60)
        _ = try daemon.client.get("/v1/version", as: APIDaemonInfo.self)
        #expect(access(data, F_OK) != 0)
        #expect(Self.entries("\(daemon.root)/staging").isEmpty)
        #expect(Self.entries("\(daemon.root)/quarantine").isEmpty)

        try daemon.installProbe("com.example.after")
        let later = try daemon.launch("com.example.after", ["exit", "0"])
        #expect(try daemon.wait(later.id).exit?.code == 0)
        #expect(try daemon.run("appd", ["uninstall", "com.example.after"]).code == 0)
    }

    @Test(
        "a data container that cannot be removed is quarantined: uninstall, installs and launches go on, doctor reports it and removes it once it can"
    )
    func undeletable() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.stuck")
        let data = try daemon.client.get(
            "/v1/apps/com.example.stuck/containers/data", as: APIContainer.self
        ).path
        let made = try daemon.launch("com.example.stuck", ["deep-tree", "50"])
        #expect(try daemon.wait(made.id).exit?.code == 0)
        var deepest = "\(data)/Documents/deep"
        for _ in 0..<20 { deepest += "/d" }
        let stuck = "\(deepest)/pinned"
        try "x".write(toFile: stuck, atomically: false, encoding: .utf8)
        try Self.chattr("+i", stuck)
        // A poisoned leftover in staging too, as a crashed uninstall leaves one, with the
        // mark that makes the next change run the full recovery.
        let poison = "\(daemon.root)/staging/trash-poisoned"
        try FileManager.default.createDirectory(
            atPath: "\(poison)/a/b", withIntermediateDirectories: true)
        try "x".write(toFile: "\(poison)/a/b/pinned", atomically: false, encoding: .utf8)
        try Self.chattr("+i", "\(poison)/a/b/pinned")
        var pinned = [stuck, "\(poison)/a/b/pinned"]
        defer {
            // Whatever happened, the test leaves nothing immutable behind.
            for path in pinned { _ = try? Self.chattr("-i", path) }
            let quarantine = "\(daemon.root)/quarantine"
            for case let path as String in FileManager.default.enumerator(atPath: quarantine)
                ?? NSEnumerator()
            where path.hasSuffix("pinned") {
                _ = try? Self.chattr("-i", "\(quarantine)/\(path)")
            }
        }

        let uninstall = try daemon.run("appd", ["uninstall", "com.example.stuck"])
        #expect(uninstall.code == 0, "\(uninstall.output)")
        let quarantined = Self.entries("\(daemon.root)/quarantine")
        #expect(quarantined.count == 2, "\(quarantined)")
        #expect(Self.entries("\(daemon.root)/staging").isEmpty)
        #expect(access(data, F_OK) != 0)
        #expect(
            daemon.serveLog.contains("quarantined as \(daemon.root)/quarantine/"),
            "\(daemon.serveLog)")
        pinned = quarantined.map { "\(daemon.root)/quarantine/\($0)" }.flatMap { top in
            (FileManager.default.enumerator(atPath: top)?.allObjects as? [String] ?? [])
                .filter { $0.hasSuffix("pinned") }.map { "\(top)/\($0)" }
        }
        #expect(pinned.count == 2)

        // Nothing waits on them: installs (each running recovery), launches, uninstalls.
        try daemon.installProbe("com.example.next")
        for round in 0..<3 {
            if round > 0 {
                let install = try daemon.run(
                    "appd", ["install", "\(daemon.directory)/src-com.example.next/Probe.app"])
                #expect(install.code == 0, "\(install.output)")
            }
            let launched = try daemon.launch("com.example.next", ["exit", "\(round)"])
            #expect(try daemon.wait(launched.id).exit?.code == Int32(round))
            #expect(try daemon.run("appd", ["uninstall", "com.example.next"]).code == 0)
        }

        let check = try daemon.run("appd", ["doctor"])
        #expect(check.code == 1)
        #expect(
            check.output.components(separatedBy: "quarantined: an earlier removal failed").count
                == 3, "\(check.output)")
        let stillStuck = try daemon.run("appd", ["doctor", "--repair"])
        #expect(stillStuck.output.contains("still cannot be removed"), "\(stillStuck.output)")

        for path in pinned { try Self.chattr("-i", path) }
        let repaired = try daemon.run("appd", ["doctor", "--repair"])
        #expect(repaired.code == 0, "\(repaired.output)")
        #expect(Self.entries("\(daemon.root)/quarantine").isEmpty)
    }

    @Test(
        "a mount inside a leftover is never crossed: doctor refuses to remove through it, and what is mounted there survives"
    )
    func mountInside() throws {
        let scratch =
            FileManager.default.temporaryDirectory.path
            + "/appd-mount-inside-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let root = "\(scratch)/root"
        let victim = "\(scratch)/victim"
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        try FileManager.default.createDirectory(
            atPath: "\(root)/quarantine/trash-mounted/inner", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: true)
        try "precious".write(toFile: "\(victim)/keep", atomically: false, encoding: .utf8)
        // In a mount namespace of its own (nothing reaches the host's mount table): a bind mount
        // inside the leftover, as an admin's debugging or a crashed launch might leave one.
        let script = """
            mount --make-rprivate / && mount --bind \(victim) \(root)/quarantine/trash-mounted/inner && \
            \(builtExecutable("appd")) doctor --repair; echo "doctor exit $?"; umount \(root)/quarantine/trash-mounted/inner
            """
        let result = try TestDaemon.run(
            "/usr/bin/unshare", ["--mount", "/bin/sh", "-c", script],
            environment: ["APPD_ROOT": root, "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"])
        #expect(result.output.contains("is a mount point"), "\(result.output)")
        #expect(result.output.contains("doctor exit 1"), "\(result.output)")
        #expect((try? String(contentsOfFile: "\(victim)/keep", encoding: .utf8)) == "precious")
    }
}
