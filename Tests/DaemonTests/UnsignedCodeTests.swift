import AppdAPI
import CLinux
import Foundation
import Testing

/// Issue 24 §4: only signed code runs. A real sandboxed probe (a dynamically linked C program)
/// launched by a real daemon tries every way it knows to run code it wrote
/// (Examples/Probe/attack_code.c); without `cs.allow-jit` each is refused, with it the JIT path
/// works.
@Suite("only signed code runs", .serialized, rootOnly)
struct UnsignedCodeTests {
    /// The probe's `code` lines of one launch, by name: `allowed`, `refused ERRNO`, `value X`.
    func attempts(_ daemon: TestDaemon, _ id: String) throws -> [String: String] {
        let instance = try daemon.launch(id, ["code"])
        let ended = try daemon.wait(instance.id)
        let log = try daemon.logs(instance.id)
        #expect(ended.exit?.code == 0, "\(id): \(String(describing: ended.exit)); \(log)")
        print("\(id): \(log)")
        var outcomes: [String: String] = [:]
        for line in log.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, parts[0].hasPrefix("code-") else { continue }
            outcomes[String(parts[0])] = parts[1].trimmingCharacters(in: .whitespaces)
        }
        return outcomes
    }

    static let kernelHasMDWE = appd_prctl_get_mdwe() >= 0
    static let kernelHasMemfdNoexec = access("/proc/sys/vm/memfd_noexec", F_OK) == 0

    @Test(
        "an app without entitlements cannot run code it wrote: RW->RX, a shared RX page, a memfd mapped RX or exec'd, a file of $HOME mapped executable, an exec from $TMPDIR or /dev/shm"
    )
    func noEntitlements() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.plain")
        let outcomes = try attempts(daemon, "com.example.plain")
        for name in [
            "code-mprotect-rx", "code-shared-anon-rx", "code-memfd-create", "code-memfd-mmap-rx",
            "code-memfd-execveat", "code-home-mmap-exec", "code-tmp-exec", "code-shm-mmap-exec",
        ] {
            let outcome = outcomes[name] ?? "missing"
            #expect(outcome.hasPrefix("refused"), "\(name): \(outcome)")
        }
        // The kernel's own guard where it has one (6.3+); seccomp stands in before.
        #expect(outcomes["code-mdwe"] == (Self.kernelHasMDWE ? "value 1" : "value -1"))
        // Each refused by the layer that should: the noexec mounts (EPERM from mmap, EACCES
        // from execve), MDWE or seccomp (EACCES), seccomp for memfds (EPERM).
        #expect(outcomes["code-home-mmap-exec"] == "refused EPERM")
        #expect(outcomes["code-tmp-exec"] == "refused EACCES")
        #expect(outcomes["code-mprotect-rx"] == "refused EACCES")
        #expect(outcomes["code-memfd-create"] == "refused EPERM")
    }

    @Test(
        "with cs.allow-jit the JIT path works (RW->RX, a memfd mapped RX); a memfd is still never exec'd where the kernel has vm.memfd_noexec"
    )
    func allowJIT() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe(
            "com.example.jit", entitlements: "<key>com.apple.security.cs.allow-jit</key><true/>")
        let outcomes = try attempts(daemon, "com.example.jit")
        #expect(outcomes["code-mdwe"] == (Self.kernelHasMDWE ? "value 0" : "value -1"))
        for name in [
            "code-mprotect-rx", "code-memfd-create", "code-memfd-mmap-rx", "code-shared-anon-rx",
        ] {
            #expect(outcomes[name] == "allowed", "\(name): \(outcomes[name] ?? "missing")")
        }
        if Self.kernelHasMemfdNoexec {
            #expect(outcomes["code-memfd-execveat"] == "refused EACCES")
        }
        // What it writes to disk stays data: JIT is memory, not files.
        #expect(outcomes["code-home-mmap-exec"] == "refused EPERM")
        #expect(outcomes["code-tmp-exec"] == "refused EACCES")
    }

    @Test(
        "a host interpreter runs a script the app wrote only where its signed Info.plist names it and the signer may grant it"
    )
    func hostInterpreters() throws {
        let daemon = try TestDaemon()
        // Without AppdHostExecutables nothing of the host is executable, nor readable to the
        // loader: the shell, python3 on a script the app wrote, python3 through ld.so.
        try daemon.installProbe("com.example.plain")
        let plain = try attempts(daemon, "com.example.plain")
        #expect(plain["code-host-sh"] == "refused EACCES", "\(plain)")
        #expect(plain["code-host-python"] == "refused EACCES", "\(plain)")
        let loader = plain["code-loader-python"] ?? "missing"
        #expect(loader != "allowed" && loader != "missing", "\(plain)")
        // Its own dynamically linked executable still loads (the loader and the libraries).
        #expect(plain["code-mdwe"] != nil)

        // Named in Info.plist, granted by the signer (HostExecutables=*): they run.
        let named = TestDaemon.hostExecutables(["/usr/bin/python3", "/bin/sh"])
        try daemon.installProbe("com.example.scripted", info: named)
        let scripted = try attempts(daemon, "com.example.scripted")
        #expect(scripted["code-host-sh"] == "allowed", "\(scripted)")
        #expect(scripted["code-host-python"] == "allowed", "\(scripted)")
        // Said so, interpreters flagged: appd profile, appd verify.
        let profile = try daemon.run(
            "appd", ["profile", "--config", daemon.configPath, "com.example.scripted"])
        #expect(
            profile.output.contains(
                "/usr/bin/python3 (an INTERPRETER: it runs code that was never signed)"),
            "\(profile.output)")
        let plainProfile = try daemon.run(
            "appd", ["profile", "--config", daemon.configPath, "com.example.plain"])
        #expect(
            plainProfile.output.contains("none: nothing of the host is executable to it"),
            "\(plainProfile.output)")
        let bundle = try daemon.makeProbe("com.example.verified", info: named)
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
        let verify = try daemon.run("appd", ["verify", "--config", daemon.configPath, bundle])
        #expect(
            verify.output.contains("host program /usr/bin/python3 (an interpreter"),
            "\(verify.output)")

        // The admin takes the grant back: from the next launch the programs are not executable.
        let config = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
        try config.replacingOccurrences(of: "HostExecutables=*\n", with: "")
            .write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        let reload = try daemon.run("appd", ["reload"])
        #expect(reload.code == 0, "\(reload.output)")
        let revoked = try attempts(daemon, "com.example.scripted")
        #expect(revoked["code-host-sh"] == "refused EACCES", "\(revoked)")
        #expect(revoked["code-host-python"] == "refused EACCES", "\(revoked)")

        // A signer that may not grant host programs: the install is refused, naming them.
        let strict = try TestDaemon(hostExecutables: nil)
        let bundleStrict = try strict.makeProbe("com.example.scripted", info: named)
        try TestDaemon.tool(["sign", "--key", strict.signingKey, bundleStrict])
        let refused = try strict.run("appd", ["install", bundleStrict])
        #expect(refused.code != 0)
        #expect(
            refused.output.contains(
                "names host programs in AppdHostExecutables (Info.plist) that signer 'test'")
                && refused.output.contains("/usr/bin/python3 (an interpreter")
                && refused.output.contains("HostExecutables="), "\(refused.output)")
        #expect(throws: (any Error).self) { try strict.client.app("com.example.scripted") }
    }
}
