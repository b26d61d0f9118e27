import AppdAPI
import Foundation
import Testing

/// Each app's shared namespaces (Supervisor/NamespaceTemplates.swift, docs/launcher-protocol.md
/// "Shared namespaces"): instances of one app join its root, network and uts namespaces; each
/// keeps its own mount copy, pid namespace, procfs and /dev/shm.
@Suite(.serialized, rootOnly) struct SharedNamespaceTests {
    /// The app process (the Probe) of an instance: the process of its cgroup running Probe.
    static func appProcess(_ instance: APIInstance) -> Int32? {
        guard let cgroup = instance.cgroup else { return nil }
        return instanceProcesses(cgroup: cgroup).first { pid in
            (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) == "Probe\n"
        }
    }

    static func namespace(_ pid: Int32, _ name: String) -> String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/ns/\(name)"))
            ?? "?"
    }

    /// Launches `count` instances of `id` running `sleep 30`; returns their app processes.
    static func running(_ daemon: TestDaemon, _ id: String, count: Int) throws -> [Int32] {
        var pids: [Int32] = []
        for _ in 0..<count {
            let instance = try daemon.launch(id, ["sleep", "30"])
            var pid: Int32?
            _ = try daemon.eventually {
                pid = try Self.appProcess(daemon.instance(instance.id))
                return pid != nil
            }
            try #require(pid != nil, "instance \(instance.id) of \(id) never ran its app")
            pids.append(pid!)
        }
        return pids
    }

    @Test(
        "instances of one app share its network and uts namespaces, never another app's; each has its own mount copy, pid namespace and /proc"
    )
    func sharedWithinApp() throws {
        let daemon = try TestDaemon(config: "[Lifecycle]\nActivePolicy=all\n")
        try daemon.installProbe("com.example.shareda")
        try daemon.installProbe("com.example.sharedb")
        let a = try Self.running(daemon, "com.example.shareda", count: 3)
        let b = try Self.running(daemon, "com.example.sharedb", count: 1)

        for name in ["net", "uts"] {
            #expect(
                Set(a.map { Self.namespace($0, name) }).count == 1, "\(name) of one app's instances"
            )
            #expect(Self.namespace(a[0], name) != Self.namespace(b[0], name), "\(name) of two apps")
            #expect(
                Self.namespace(a[0], name) != Self.namespace(getpid(), name), "\(name) of the host")
        }
        for name in ["mnt", "pid", "ipc"] {
            #expect(
                Set((a + b).map { Self.namespace($0, name) }).count == 4,
                "\(name): one per instance")
        }
        for pid in a {
            // Its procfs is its own pid namespace's: PID 1 (the launcher's init) and the app.
            let entries = try FileManager.default.contentsOfDirectory(
                atPath: "/proc/\(pid)/root/proc")
            #expect(
                Set(entries.filter { Int($0) != nil }) == ["1", "2"],
                "the /proc of app process \(pid)")
            // Read to its end: a procfs file says its size is 0.
            let mounts = String(
                decoding: FileHandle(forReadingAtPath: "/proc/\(pid)/mountinfo")?
                    .readDataToEndOfFile() ?? Data(),
                as: UTF8.self)
            let dev = mounts.split(separator: "\n").map { $0.split(separator: " ") }
            // The shared tmpfs (root, /etc, /dev) is read-only in every copy; /dev/shm is the
            // instance's own, writable.
            for point in ["/", "/etc", "/dev"] {
                let line = dev.first { $0.count > 5 && $0[4] == point }
                #expect(
                    line.map { $0[5].hasPrefix("ro,") } == true,
                    "\(point) in \(pid): \(line?.joined(separator: " ") ?? "absent")")
            }
            #expect(
                dev.contains { $0.count > 5 && $0[4] == "/dev/shm" && $0[5].hasPrefix("rw,") },
                "/dev/shm in \(pid)")
        }
        var shmA = stat()
        var shmB = stat()
        #expect(
            stat("/proc/\(a[0])/root/dev/shm", &shmA) == 0
                && stat("/proc/\(a[1])/root/dev/shm", &shmB) == 0)
        #expect(shmA.st_dev != shmB.st_dev, "/dev/shm: one tmpfs per instance")
    }

    @Test(
        "an instance cannot plant anything its siblings would see in the shared root (/, /etc, /dev)"
    )
    func plantingRefused() throws {
        let daemon = try TestDaemon(config: "[Lifecycle]\nActivePolicy=all\n")
        try daemon.installProbe("com.example.planter")
        let sibling = try Self.running(daemon, "com.example.planter", count: 1)[0]
        // (/tmp is the app's own tmp, a link into the data container its instances share.)
        for path in ["/planted", "/etc/planted", "/dev/planted"] {
            let attacker = try daemon.launch("com.example.planter", ["write", path])
            let ended = try daemon.wait(attacker.id)
            #expect(ended.exit?.code == 0, "write \(path): \(String(describing: ended.exit))")
            let output = try daemon.logs(attacker.id)
            #expect(output.contains("write: refused"), "write \(path): \(output)")
            let seen = URL(fileURLWithPath: path).standardized.path
            #expect(
                !FileManager.default.fileExists(atPath: "/proc/\(sibling)/root\(seen)"),
                "\(seen) in a sibling")
        }
    }

    @Test(
        "a bind source replaced on the host (renamed over) is seen by the next launch: the app's shared root is rebuilt"
    )
    func replacedSourceRebuilds() throws {
        let fm = FileManager.default
        let shared = fm.temporaryDirectory.appendingPathComponent(
            "appd-shared-\(UUID().uuidString)"
        ).path
        try fm.createDirectory(atPath: shared, withIntermediateDirectories: true)
        try "one\n".write(toFile: "\(shared)/marker", atomically: false, encoding: .utf8)
        try fm.setAttributes([.posixPermissions: 0o755], ofItemAtPath: shared)
        defer {
            try? fm.removeItem(atPath: shared)
            try? fm.removeItem(atPath: shared + ".old")
        }
        let daemon = try TestDaemon(
            config:
                "[Lifecycle]\nActivePolicy=all\n[Sandbox]\nSystemPaths=/usr /opt/swift/usr/lib/swift/linux \(shared)\n"
        )
        try daemon.installProbe("com.example.replaced")
        let first = try Self.running(daemon, "com.example.replaced", count: 2)
        #expect(Self.namespace(first[0], "net") == Self.namespace(first[1], "net"))
        #expect(
            try String(contentsOfFile: "/proc/\(first[1])/root\(shared)/marker", encoding: .utf8)
                == "one\n")

        // What package managers and resolvconf do: a new tree renamed over the old one.
        try fm.moveItem(atPath: shared, toPath: shared + ".old")
        try fm.createDirectory(atPath: shared, withIntermediateDirectories: false)
        try fm.setAttributes([.posixPermissions: 0o755], ofItemAtPath: shared)
        try "two\n".write(toFile: "\(shared)/marker", atomically: false, encoding: .utf8)
        let later = try Self.running(daemon, "com.example.replaced", count: 1)[0]
        #expect(
            try String(contentsOfFile: "/proc/\(later)/root\(shared)/marker", encoding: .utf8)
                == "two\n")
        #expect(
            try String(contentsOfFile: "/proc/\(first[0])/root\(shared)/marker", encoding: .utf8)
                == "one\n")
    }

    /// The mount namespaces the daemon holds open (its templates).
    static func heldMountNamespaces(_ daemon: TestDaemon) -> Int {
        guard let pid = daemon.process?.processIdentifier,
            let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")
        else { return -1 }
        return fds.count { fd in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"))?
                .hasPrefix("mnt:") == true
        }
    }

    @Test("uninstall drops the app's shared namespaces: nothing of its containers stays held")
    func uninstallDrops() throws {
        let daemon = try TestDaemon(config: "[Lifecycle]\nActivePolicy=all\n")
        try daemon.installProbe("com.example.dropped")
        #expect(Self.heldMountNamespaces(daemon) == 0)
        let pids = try Self.running(daemon, "com.example.dropped", count: 2)
        #expect(Self.heldMountNamespaces(daemon) == 1, "one template for the app")
        for pid in pids { kill(pid, SIGKILL) }
        #expect(
            try daemon.eventually {
                try daemon.client.get("/v1/instances", as: [APIInstance].self).isEmpty
            })
        #expect(Self.heldMountNamespaces(daemon) == 1, "kept for the next launch while not idle")
        let uninstall = try daemon.run("appd", ["uninstall", "com.example.dropped"])
        #expect(uninstall.code == 0, "\(uninstall.output)")
        #expect(Self.heldMountNamespaces(daemon) == 0, "dropped at uninstall")
    }

    @Test(
        "appd chrooted (systemd's RootDirectory=, a VM's init): joined launches get the app's root, not the namespace's"
    )
    func chrootedDaemon() throws {
        // The daemon runs chrooted into a recursive bind of / in a mount namespace of its own:
        // the same paths, but its root is not its namespace's root.
        let top = "/var/tmp/appd-chroot-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: top, withIntermediateDirectories: false)
        defer { rmdir(top) }
        let script = """
            dir=$1; shift
            mount --rbind / "$dir" || exit 111
            exec /usr/sbin/chroot "$dir" "$@"
            """
        let daemon = try TestDaemon(
            config: "[Lifecycle]\nActivePolicy=all\n",
            wrapper: [
                "/usr/bin/unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                script, "sh", top,
            ])
        try daemon.installProbe("com.example.chrooted")
        let pids = try Self.running(daemon, "com.example.chrooted", count: 3)
        #expect(
            Set(pids.map { Self.namespace($0, "net") }).count == 1,
            "the later launches joined the template")
        for pid in pids {
            // The sandbox's root: /usr and its own /proc, nothing else of the host.
            #expect(FileManager.default.fileExists(atPath: "/proc/\(pid)/root/usr/bin"))
            for hostOnly in ["/sys", "/root", "/boot"]
            where FileManager.default.fileExists(atPath: hostOnly) {
                #expect(
                    !FileManager.default.fileExists(atPath: "/proc/\(pid)/root\(hostOnly)"),
                    "the host's \(hostOnly) in app process \(pid)")
            }
            #expect(
                !FileManager.default.fileExists(atPath: "/proc/\(pid)/root\(top)"),
                "the chroot in app process \(pid)")
            let entries = try FileManager.default.contentsOfDirectory(
                atPath: "/proc/\(pid)/root/proc")
            #expect(
                Set(entries.filter { Int($0) != nil }) == ["1", "2"],
                "the /proc of app process \(pid)")
        }
    }
}
