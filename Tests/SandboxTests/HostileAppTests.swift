import AppBundle
import Foundation
import Sandbox
import Supervisor
import Testing

/// The probe (Examples/Probe) installed and launched like any app, without entitlements: what
/// it must not be able to do, and what must still work.
@Suite("hostile app, no entitlements", .serialized, rootOnly)
struct HostileAppTests {
    static let refusedBaseline = [
        "ioctl-TIOCSTI", "ioctl-TIOCSTI-high", "ioctl-TIOCLINUX", "ioctl-TIOCLINUX-high",
        "ioctl-TIOCSETD", "ioctl-TIOCSETD-high", "clone3", "clone-newns", "unshare-user",
        "unshare-net", "unshare-ns", "mount", "umount",
        "pivot_root", "chroot", "open_tree", "fsopen", "move_mount", "fspick", "mount_setattr",
        "setns", "ptrace-traceme", "perf_event_open", "bpf", "userfaultfd", "io_uring_setup",
        "keyctl", "add_key", "request_key", "kexec_load", "init_module", "finit_module", "acct",
        "swapon", "syslog", "reboot", "personality-linux32", "mmap-wx", "mprotect-wx",
        "socket-packet", "socket-vsock", "socket-bluetooth", "socket-netlink-audit", "abi-i386",
        "abi-x32", "raise-hard-rlimit", "mknod-device", "write-proc-self-exe", "read-etc-shadow",
        "write-var-tmp", "write-root", "write-etc", "write-bundle",
        "write-own-executable",
        // A memfd can be written and then mapped executable: refused without cs.allow-jit
        // (issue 24 §4, docs/sandbox-layers.md "Code").
        "memfd",
    ]
    static let allowedBaseline = [
        "fork", "exec-sh", "thread", "socketpair-unix", "socket-inet", "getrandom",
        "mmap-rw", "write-documents", "personality-query", "socket-netlink-route",
        // The instance's own /dev/shm tmpfs (noexec, one per instance: SharedNamespaceTests),
        // where shm_open and sem_open make their files (issue 38).
        "write-dev-shm",
        // /tmp: a link to the app's own tmp in its data container (AppTmp, issue 38).
        "write-tmp",
    ]

    @Test("every attack of the baseline is refused, and ordinary programs still work")
    func baseline() throws {
        let world = try SandboxWorld()
        // The shell its exec-sh runs, named as a signed app names a host program.
        try world.install("com.example.probe", hostExecutables: ["/bin/sh"])
        let run = try world.launch("com.example.probe", ["all"])
        #expect(run.status == .exited(0), "\(run)")
        for name in Self.refusedBaseline {
            #expect(run.refused(name), "\(name) should be refused: \(run[name] ?? "not reported")")
        }
        for name in Self.allowedBaseline {
            #expect(run.allowed(name), "\(name) should work: \(run[name] ?? "not reported")")
        }
        // clone3 must say ENOSYS, so that libc falls back to clone.
        #expect(run["clone3"] == "refused ENOSYS")
    }

    @Test(
        "runs as its own uid with no privileges, alone in its pid namespace, seeing only its containers"
    )
    func identityAndView() throws {
        let world = try SandboxWorld()
        let app = try world.install("com.example.probe")
        let other = try world.install("com.example.other")
        let run = try world.launch("com.example.probe", ["all"])
        #expect(run.value("uid") == String(app.uid))
        #expect(run.value("uid") != "0")
        #expect(app.uid != other.uid)
        #expect(run.value("status-NoNewPrivs") == "1")
        #expect(run.value("status-Seccomp") == "2")
        for caps in ["CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"] {
            #expect(run.value("status-\(caps)") == "0000000000000000", "\(caps)")
        }
        // PID 1 (the launcher's reaper), the probe and its own children: nothing of the host.
        let count = Int(run.value("process-count") ?? "") ?? 99
        #expect(count <= 4, "sees \(count) processes")
        #expect(run.value("pid") != "1")
        #expect(run.value("hostname") == "Probe")
        #expect(run.value("extra-fds") == "none")
        #expect(run.value("cwd") == app.dataContainer(in: world.store.root))
        // Landlock refuses listing anything outside its rules, even the new root ...
        #expect(run.refused("root-entries"), "\(run)")
        #expect(
            try world.launch("com.example.probe", ["list", world.store.root.bundleContainersPath])
                .refused("list"))
        // ... and what is not mounted does not exist at all: ENOENT, not EACCES.
        for hidden in [
            "/root", "/home", "/run", "/var/lib", "/srv", "/boot", "/etc/shadow",
            "/etc/ssh", "/etc/sudoers", "/etc/machine-id", "/dev/shm/x", "/dev/sda",
            other.dataContainer(in: world.store.root),
            other.bundleContainer(in: world.store.root) ?? "/x",
        ] {
            let probe = try world.launch("com.example.probe", ["read", hidden])
            #expect(probe["read"] == "refused ENOENT", "\(hidden): \(probe["read"] ?? "-")")
        }
        let registry = try world.launch(
            "com.example.probe", ["read", world.store.root.registryPath])
        #expect(registry.refused("read"), "\(registry)")
    }

    @Test("cannot read or write another app's data container")
    func otherAppsData() throws {
        let world = try SandboxWorld()
        try world.install("com.example.probe")
        let victim = try world.install("com.example.victim")
        let secret = "\(victim.dataContainer(in: world.store.root))/Documents/secret.txt"
        try "secret".write(toFile: secret, atomically: false, encoding: .utf8)
        chown(secret, victim.uid, victim.gid)
        let read = try world.launch("com.example.probe", ["read", secret])
        #expect(read.refused("read"), "\(read)")
        let write = try world.launch(
            "com.example.probe",
            ["write", "\(victim.dataContainer(in: world.store.root))/Documents/x"])
        #expect(write.refused("write"), "\(write)")
    }

    @Test("a file the app wrote into its container cannot be executed")
    func noExecFromData() throws {
        let world = try SandboxWorld()
        let app = try world.install("com.example.probe", hostExecutables: ["/bin/sh"])
        let copy = "\(app.dataContainer(in: world.store.root))/Documents/sh"
        try FileManager.default.copyItem(atPath: "/bin/dash", toPath: copy)
        chown(copy, app.uid, app.gid)
        chmod(copy, 0o755)
        let run = try world.launch("com.example.probe", ["exec", copy, "-c", "exit 0"])
        #expect(run.refused("exec"), "\(run)")
        let system = try world.launch("com.example.probe", ["exec", "/bin/sh", "-c", "exit 3"])
        #expect(system.status == .exited(3), "\(system)")
    }

    @Test("the environment is exactly the documented one, nothing from the caller")
    func environment() throws {
        setenv("LD_PRELOAD", "/tmp/evil.so", 1)
        setenv("APPD_TEST_LEAK", "leak", 1)
        defer {
            unsetenv("LD_PRELOAD")
            unsetenv("APPD_TEST_LEAK")
        }
        let world = try SandboxWorld()
        let app = try world.install("com.example.probe")
        let run = try world.launch("com.example.probe", ["env"])
        let names = Set(
            run.output.split(separator: "\n").compactMap { line -> String? in
                guard line.hasPrefix("env: value ") else { return nil }
                return String(line.dropFirst("env: value ".count).split(separator: "=").first ?? "")
            })
        #expect(
            names == [
                "HOME", "CFFIXED_USER_HOME", "TMPDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME",
                "XDG_DATA_HOME", "APPD_BUNDLE_ID", "APPD_BUNDLE_PATH", "PATH", "USER", "LOGNAME",
                "LANG",
            ])
        let home = app.dataContainer(in: world.store.root)
        #expect(run.output.contains("env: value HOME=\(home)\n"))
        #expect(run.output.contains("env: value TMPDIR=\(home)/tmp/\n"))
    }

    @Test("exit codes and signals come back as the app's")
    func exitStatus() throws {
        let world = try SandboxWorld()
        try world.install("com.example.probe", hostExecutables: ["/bin/sh"])
        #expect(try world.launch("com.example.probe", ["exit", "42"]).status == .exited(42))
        let killed = try world.launch("com.example.probe", ["exec", "/bin/sh", "-c", "kill -9 $$"])
        #expect(killed.status == .signaled(9), "\(killed)")
        #expect(killed.status.shellCode == 137)
    }

    @Test("TIOCSTI and TIOCSETD are refused with a terminal attached too")
    func consoleInjection() throws {
        let world = try SandboxWorld()
        try world.install("com.example.probe")
        // posix_openpt and friends are not exported to Swift: the ioctls they wrap.
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        #expect(master >= 0)
        defer { close(master) }
        var unlock: Int32 = 0
        var number: UInt32 = 0
        let unlockRequest: UInt = 0x4004_5431  // TIOCSPTLCK
        let numberRequest: UInt = 0x8004_5430  // TIOCGPTN
        #expect(ioctl(master, unlockRequest, &unlock) == 0)
        #expect(ioctl(master, numberRequest, &number) == 0)
        let slave = open("/dev/pts/\(number)", O_RDWR | O_NOCTTY | O_CLOEXEC)
        #expect(slave >= 0)
        defer { close(slave) }
        let run = try world.launch("com.example.probe", ["all"], console: slave)
        #expect(run.refused("ioctl-TIOCSTI"), "\(run)")
        #expect(run.refused("ioctl-TIOCSTI-high"))
        #expect(run.refused("ioctl-TIOCLINUX"))
        // On its own terminal an app may set N_TTY: only the filter refuses it.
        #expect(run["ioctl-TIOCSETD"] == "refused EPERM", "\(run)")
        #expect(run["ioctl-TIOCSETD-high"] == "refused EPERM")
        let pts = try world.launch("com.example.probe", ["list", "/dev/pts"], console: slave)
        #expect(pts.value("list")?.contains("ptmx") == true, "\(pts)")
        let noConsole = try world.launch("com.example.probe", ["list", "/dev/pts"])
        #expect(noConsole["list"] == "refused ENOENT", "\(noConsole)")
    }

    /// With network.client too (as the sample's own Entitlements.plist asks): on the host's
    /// network, under the loopback guard, Foundation's Process still works (its CFSocket wakes
    /// through a UDP pair on 127.0.0.1: the app's own sockets), and under MDWE without memfds.
    @Test(
        "the sample Swift app runs sandboxed: Bundle.main, FileManager, UserDefaults, Process",
        arguments: [false, true])
    func swiftFoundationApp(networkClient: Bool) throws {
        let world = try SandboxWorld()
        let greeting = try world.installHello(
            "com.example.hello",
            entitlements: networkClient ? ["com.apple.security.network.client": .bool(true)] : [:])
        let app = try world.app("com.example.hello")
        for expected in [1, 2] {
            let run = try world.launch("com.example.hello", ["x"])
            #expect(run.profile.refuseExecGain, "\(run.profile)")
            #expect((run.profile.loopbackPorts != nil) == networkClient)
            #expect(run.status == .exited(0), "\(run)")
            #expect(run.output.contains(greeting.trimmingCharacters(in: .whitespacesAndNewlines)))
            #expect(run.output.contains("launches:  \(expected) ("), "\(run)")
            #expect(run.output.contains("defaults:  timesOpened = \(expected)"), "\(run)")
            #expect(
                run.output.contains("process:   child says hi from \(app.uid) (status 0)"), "\(run)"
            )
            #expect(run.output.contains("arguments: [\"x\"]"))
        }
        let prefs =
            "\(app.dataContainer(in: world.store.root))/Library/Preferences/com.example.hello.plist"
        #expect(FileManager.default.fileExists(atPath: prefs))
    }
}
