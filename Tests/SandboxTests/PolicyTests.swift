import AppBundle
import AppdBase
import Foundation
import Sandbox
import Testing

@testable import AppdConfig

/// The policy as a pure function: entitlements + settings + kernel → profile. No root needed.
@Suite("sandbox policy")
struct PolicyTests {
    static let fullKernel = KernelLayers(landlockABI: 7, seccomp: true)

    static func subject(
        _ entitlements: [String: PlistValue], groups: [SandboxSubject.GroupContainer] = []
    )
        -> SandboxSubject
    {
        var values = entitlements
        if values["com.apple.security.app-sandbox"] == nil {
            values["com.apple.security.app-sandbox"] = .bool(true)
        }
        return SandboxSubject(
            bundleID: "com.example.notes", name: "My Notes!", bundleContainer: "/s/Bundle/B",
            bundlePath: "/s/Bundle/B/Notes.app", executable: "/s/Bundle/B/Notes.app/Notes",
            dataContainer: "/s/Data/D", uid: 2_000_000_001, gid: 2_000_000_001,
            entitlements: Entitlements(values: values), groupContainers: groups)
    }

    static func profile(
        _ entitlements: [String: PlistValue] = [:], kernel: KernelLayers = fullKernel,
        settings: (inout SandboxSettings) -> Void = { _ in }
    ) throws -> SandboxProfile {
        var s = SandboxSettings()
        settings(&s)
        return try SandboxPolicy(settings: s, kernel: kernel).profile(for: subject(entitlements))
    }

    @Test("no entitlements: private network, TCP denied, no ptrace, no W+X, only its containers")
    func baseline() throws {
        let p = try Self.profile()
        #expect(p.namespaces.contains(.net) && p.loopback)
        #expect(!p.namespaces.contains(.user))
        #expect(p.landlock.restrictedTCP == [.bind, .connect])
        #expect(p.seccomp.rules.contains { $0.syscall == "ptrace" })
        #expect(p.seccomp.rules.contains { $0.syscall == "mmap" })
        #expect(p.hostname == "My-Notes")
        #expect(p.uid == 2_000_000_001 && p.groups.isEmpty)
        let binds = p.mounts.filter { [.roBind, .rwBind].contains($0.kind) }.map(\.destination)
        #expect(binds == ["/s/Bundle/B", "/s/Data/D"])
        #expect(
            !p.mounts.contains {
                ($0.source ?? "").hasPrefix("/home") || $0.destination.hasPrefix("/root")
            })
        #expect(
            !p.mounts.contains {
                $0.destination == "/etc/shadow"
                    || $0.destination == "/etc/passwd" && $0.kind != .file
            })
        #expect(p.landlock.paths.contains { $0.path == "/s/Data/D" && $0.access == .rw })
        #expect(p.landlock.paths.contains { $0.path == "/s/Bundle/B" && $0.access == .rx })
        #expect(p.environmentValue("HOME") == "/s/Data/D")
        #expect(p.environmentValue("TMPDIR") == "/s/Data/D/tmp/")
        #expect(p.environmentValue("LD_PRELOAD") == nil)
        #expect(p.workingDirectory == "/s/Data/D")
    }

    @Test(
        "only signed code: the host's programs are neither executable nor readable; its libraries are read-only; the loader and the programs Info.plist names are executable"
    )
    func hostPrograms() throws {
        var app = Self.subject([:])
        let policy = SandboxPolicy(settings: SandboxSettings(), kernel: Self.fullKernel)
        let plain = try policy.profile(for: app)
        let executable = plain.landlock.paths.filter { $0.access == .rx || $0.access == .rwx }
        #expect(
            executable.allSatisfy { $0.path == "/s/Bundle/B" || $0.path.contains("/ld-") },
            "\(executable)")
        #expect(executable.contains { $0.path.contains("/ld-") }, "the loader: \(executable)")
        #expect(plain.landlock.paths.contains { $0.path == "/usr/lib" && $0.access == .ro })
        for folder in ["/usr", "/usr/bin", "/usr/sbin", "/usr/libexec", "/usr/local/bin"] {
            #expect(
                !plain.landlock.paths.contains {
                    $0.path == "/" || $0.path == folder || folder.hasPrefix($0.path + "/")
                },
                "\(folder) is covered: \(plain.landlock.paths)")
        }
        #expect(plain.hostExecutables == nil)

        app.hostExecutables = ["/usr/bin/python3", "/usr/bin/true", "/nonexistent/tool"]
        let named = try policy.profile(for: app)
        for path in ["/usr/bin/python3", "/usr/bin/true"] {
            #expect(named.landlock.paths.contains { $0.path == path && $0.access == .rx })
        }
        #expect(!named.landlock.paths.contains { $0.path == "/nonexistent/tool" })
        #expect(
            named.hostExecutables == [
                .init(path: "/usr/bin/python3", interpreter: true),
                .init(path: "/usr/bin/true", interpreter: false),
                .init(path: "/nonexistent/tool", interpreter: false, missing: true),
            ])
    }

    @Test("network.client: host network, no TCP bind, no listen; network.server: both allowed")
    func network() throws {
        let client = try Self.profile(["com.apple.security.network.client": .bool(true)])
        #expect(!client.namespaces.contains(.net))
        #expect(client.landlock.restrictedTCP == [.bind])
        #expect(client.seccomp.rules.contains { $0.syscall == "listen" })
        #expect(client.landlock.scopes.contains(.abstractUnix))
        let server = try Self.profile(["com.apple.security.network.server": .bool(true)])
        #expect(!server.namespaces.contains(.net))
        #expect(server.landlock.restrictedTCP.isEmpty)
        #expect(!server.seccomp.rules.contains { $0.syscall == "listen" })
        let off = try Self.profile(["com.apple.security.network.server": .bool(false)])
        #expect(off.namespaces.contains(.net))
    }

    @Test("jit and debugger lift exactly their rules")
    func codeSigningKeys() throws {
        let jit = try Self.profile(["com.apple.security.cs.allow-jit": .bool(true)])
        #expect(!jit.seccomp.rules.contains { $0.syscall == "mmap" || $0.syscall == "mprotect" })
        #expect(jit.seccomp.rules.contains { $0.syscall == "ptrace" })
        let debug = try Self.profile(["com.apple.security.cs.debugger": .bool(true)])
        #expect(!debug.seccomp.rules.contains { $0.syscall == "ptrace" })
        #expect(debug.seccomp.rules.contains { $0.syscall == "mmap" })
    }

    @Test(
        "weak kernels: a missing layer refuses the launch, naming it, unless its weaker mode is allowed"
    )
    func weakKernels() throws {
        let noLandlock = KernelLayers(landlockABI: 0, seccomp: true)
        let error = try #require(throws: AppdError.self) { try Self.profile(kernel: noLandlock) }
        #expect(error.code == .unsupported)
        #expect(error.description.contains("CONFIG_SECURITY_LANDLOCK"))
        #expect(error.description.contains("WeakerModes=no-landlock"))
        let weak = try Self.profile(kernel: noLandlock) { $0.weakerModes = [.noLandlock] }
        #expect(weak.landlock.minimumABI == 0)
        #expect(weak.weakenedLayers.count == 1)

        let oldLandlock = KernelLayers(landlockABI: 3, seccomp: true)
        let client: [String: PlistValue] = ["com.apple.security.network.client": .bool(true)]
        // Seccomp closes what Landlock 3 cannot (docs/sandbox-layers.md): it launches, reduced.
        #expect(try Self.profile(client, kernel: oldLandlock).reducedLayers.count == 2)
        // Without network the namespace is the wall: an old Landlock is enough.
        #expect(try Self.profile(kernel: oldLandlock).landlock.minimumABI == 1)

        let noSeccomp = KernelLayers(landlockABI: 7, seccomp: false)
        let seccompError = try #require(throws: AppdError.self) {
            try Self.profile(kernel: noSeccomp)
        }
        #expect(seccompError.description.contains("CONFIG_SECCOMP_FILTER"))
        #expect(
            try !Self.profile(kernel: noSeccomp) { $0.weakerModes = [.noSeccomp] }.seccomp.required)
    }

    @Test(
        "code: MDWE and no memfds without cs.allow-jit; before Linux 6.3 seccomp refuses mprotect(PROT_EXEC) instead, shown as reduced"
    )
    func unsignedCode() throws {
        let plain = try Self.profile()
        #expect(plain.refuseExecGain && plain.memfdNoexec)
        #expect(plain.seccomp.rules.contains { $0.syscall == "memfd_create" })
        #expect(!plain.seccomp.rules.contains { $0.reason.contains("PR_SET_MDWE") })
        #expect(plain.reducedLayers.isEmpty)
        #expect(
            plain.encoded().contains("\nmdwe\n") && plain.encoded().contains("\nmemfd-noexec\n"))

        let linux61 = KernelLayers(landlockABI: 7, seccomp: true, mdwe: false, memfdNoexec: false)
        let old = try Self.profile(kernel: linux61)
        #expect(!old.refuseExecGain && !old.memfdNoexec)
        #expect(
            old.seccomp.rules.filter { $0.reason.contains("PR_SET_MDWE") }.map(\.syscall) == [
                "mprotect", "pkey_mprotect",
            ])
        #expect(
            old.seccomp.rules.filter { $0.syscall == "mprotect" }.contains {
                $0.conditions.map(\.value) == [0x4]
            })
        #expect(old.reducedLayers.count == 1 && old.reducedLayers[0].contains("PR_SET_MDWE"))

        let jit = try Self.profile(["com.apple.security.cs.allow-jit": .bool(true)])
        #expect(!jit.refuseExecGain && jit.memfdNoexec)
        #expect(
            !jit.seccomp.rules.contains { $0.syscall == "memfd_create" || $0.syscall == "mprotect" }
        )
        let oldJIT = try Self.profile(
            ["com.apple.security.cs.allow-jit": .bool(true)], kernel: linux61)
        #expect(oldJIT.reducedLayers.count == 1 && oldJIT.reducedLayers[0].contains("memfd_noexec"))
    }

    @Test("app-sandbox must be true unless policy says otherwise")
    func appSandboxKey() throws {
        #expect(throws: AppdError.self) {
            try Self.profile(["com.apple.security.app-sandbox": .bool(false)])
        }
        let relaxed = try Self.profile(["com.apple.security.app-sandbox": .bool(false)]) {
            $0.requireAppSandboxEntitlement = false
        }
        #expect(relaxed.seccomp.required && relaxed.landlock.minimumABI > 0)
    }

    @Test("keys without a Linux effect and unknown keys are reported, never dropped")
    func reporting() throws {
        let p = try Self.profile([
            "aps-environment": .string("production"),
            "com.example.custom": .bool(true),
        ])
        #expect(p.entitlements.first { $0.key == "aps-environment" }?.outcome == .noLinuxEffect)
        #expect(p.entitlements.first { $0.key == "com.example.custom" }?.outcome == .unknown)
    }

    @Test("temporary-exception paths: only beneath an allowed directory, no '..', no symlinks out")
    func exceptionPaths() throws {
        let scratch = NSTemporaryDirectory() + "appd-policy-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(
            atPath: "\(scratch)/ok/sub", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: "\(scratch)/ok/escape", withDestinationPath: "/etc")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let key = "com.apple.security.temporary-exception.files.absolute-path.read-write"
        let p = try Self.profile([
            key: .array([
                .string("\(scratch)/ok/sub"), .string("\(scratch)/ok/../ok/sub"),
                .string("\(scratch)/ok/escape"), .string("/etc"),
            ])
        ]) { $0.allowedReadWritePaths = ["\(scratch)/ok"] }
        let binds = p.mounts.filter { $0.kind == .rwBind }.map(\.destination)
        #expect(binds.contains("\(scratch)/ok/sub"))
        #expect(!binds.contains { $0.contains("..") || $0.hasSuffix("escape") || $0 == "/etc" })
        let decision = try #require(p.entitlements.first { $0.key == key })
        #expect(decision.outcome == .refused)
        #expect(decision.effect.contains("escape") && decision.effect.contains("/etc"))
    }

    @Test("the launcher text escapes separators, newlines and '%' in every field")
    func encoding() throws {
        var p = try Self.profile()
        p.arguments = ["/s/Bundle/B/Notes.app/Notes", "two words", "line\nbreak", "100%", ""]
        let text = p.encoded()
        #expect(text.hasPrefix("appd-profile 1\n"))
        #expect(text.contains("\narg two%20words\n"))
        #expect(text.contains("\narg line%0Abreak\n"))
        #expect(text.contains("\narg 100%25\n"))
        #expect(text.contains("\narg \n"))
        #expect(text.contains("\nseccomp required\n"))
        #expect(text.contains("\nlandlock-fs rw /s/Data/D\n"))
    }

    @Test("the deny list compiles to a BPF program libseccomp accepts")
    func bpf() throws {
        let p = try Self.profile()
        let program = try SeccompCompiler.bpf(for: p.seccomp)
        #expect(program.count % 8 == 0)
        #expect(program.count / 8 > p.seccomp.rules.count / 2)
    }

    @Test("the [Sandbox] section parses, and refuses what it cannot mean")
    func settings() throws {
        let s = try AppdConfiguration.parse(
            "[Sandbox]\nWeakerModes=no-landlock no-seccomp\n", file: "t.conf"
        ).sandbox
        #expect(s.weakerModes == [.noLandlock, .noSeccomp])
        for line in [
            "WeakerModes=no-everything", "AllowedReadOnlyPaths=/srv/../etc", "TasksMax=3", "Nope=1",
        ] {
            #expect(throws: AppdError.self, "\(line)") {
                try AppdConfiguration.parse("[Sandbox]\n\(line)\n", file: "t.conf")
            }
        }
    }
}
