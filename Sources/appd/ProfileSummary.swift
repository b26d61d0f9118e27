import AppBundle
import AppContainers
import AppdCLI
import Foundation
import PrintableText
import Sandbox

/// `appd profile` without `--full`: what an admin asks first, in about ten lines — whose app,
/// as whom, where it lives, what it may do in words, its limits, the admin's override, and
/// whether this kernel enforces every layer.
struct ProfileSummary {
    var profile: SandboxProfile
    var app: InstalledApp

    func print() {
        let p = profile
        let version =
            [app.shortVersion, app.version].compactMap { $0 }.first.map { " \($0)" } ?? ""
        Output.line("\(p.app.bundleID)\(version): sandbox profile (summary; --full for everything)")
        row("signer", app.signerKeyID.map { "key \($0)" } ?? "none (installed unsigned)")
        row("runs as", "uid \(p.uid), gid \(p.gid), no capabilities, no_new_privs")
        row("bundle", "\(p.app.bundlePath) (read-only)")
        let groups = p.mounts.filter { $0.kind == .rwBind && $0.destination != p.app.dataContainer }
        row(
            "data",
            "\(p.app.dataContainer) (read-write)"
                + (groups.isEmpty ? "" : "; \(groups.count) group container(s) read-write"))
        row("may", abilities.joined(separator: "; "))
        if let ports = p.loopbackPorts { row("loopback", Self.loopbackText(ports)) }
        row("code", Self.codeText(p))
        row("programs", Self.hostProgramsText(p))
        row(
            "limits",
            Self.cgroupText(p.cgroupLimits) + ", open files \(openFiles); "
                + Self.dataQuotaText(p.dataQuota))
        row(
            "override",
            p.adminOverride.map { "[App \(p.app.bundleID)] in appd.conf: \($0)" } ?? "none")
        if !p.weakenedLayers.isEmpty {
            row(
                "layers",
                "WEAKER SANDBOX (WeakerModes=): " + p.weakenedLayers.joined(separator: "; "))
        } else if !p.reducedLayers.isEmpty {
            row("layers", "REDUCED on this kernel: " + p.reducedLayers.joined(separator: "; "))
        } else {
            row(
                "layers",
                "namespaces, Landlock (ABI \(p.landlock.minimumABI)+), seccomp (\(p.seccomp.rules.count) rules), cgroup: all in force"
            )
        }
    }

    /// The host programs it may execute (`AppdHostExecutables`), interpreters said so.
    static func hostProgramsText(_ p: SandboxProfile) -> String {
        let programs = p.hostExecutables ?? []
        guard !programs.isEmpty else {
            return "none: nothing of the host is executable to it (Landlock)"
        }
        return programs.map { program in
            Printable(program.path).description
                + (program.interpreter
                    ? " (an INTERPRETER: it runs code that was never signed)" : "")
                + (program.missing == true ? " (not a file on this host: not granted)" : "")
        }.joined(separator: ", ")
            + (p.landlock.minimumABI == 0
                ? "; NOT ENFORCED: without Landlock every host program it sees is executable" : "")
    }

    /// What the loopback guard lets an app on the host's network reach there.
    static func loopbackText(_ ports: [UInt16]) -> String {
        "the host's 127.0.0.0/8 and ::1 refused (cgroup filter)"
            + (ports.isEmpty
                ? ""
                : " but port\(ports.count == 1 ? "" : "s") \(ports.map(String.init).joined(separator: " ")) (LoopbackPorts=)")
            + "; its own sockets there allowed"
    }

    /// What code the app can run (docs/sandbox-layers.md, "Code"), from what the profile does.
    static func codeText(_ p: SandboxProfile) -> String {
        var parts = [
            "only the bundle's and the host programs its Info.plist names: what it can write is mounted noexec"
        ]
        let rules = p.seccomp.rules
        if p.refuseExecGain {
            parts.append("no mapping gains PROT_EXEC (PR_SET_MDWE)")
        } else if rules.contains(where: {
            $0.syscall == "mprotect" && $0.conditions.count == 1 && $0.conditions[0].value == 0x4
        }) {
            parts.append("mprotect(PROT_EXEC) refused (seccomp; this kernel has no PR_SET_MDWE)")
        } else {
            parts.append("writable and executable memory allowed (cs.allow-jit)")
        }
        if rules.contains(where: { $0.syscall == "memfd_create" }) { parts.append("no memfds") }
        if p.memfdNoexec { parts.append("no memfd exec'd (vm.memfd_noexec=2)") }
        return parts.joined(separator: "; ")
    }

    /// The granted entitlements in words; the baseline when there are none.
    var abilities: [String] {
        var words: [String] = []
        let network = profile.namespaces.contains(.net)
        if network { words.append("no network (only its own lo)") }
        for decision in profile.entitlements where decision.outcome == .granted {
            guard decision.key != EntitlementCatalog.appSandbox else { continue }
            words.append(Self.words[decision.key] ?? decision.effect)
        }
        let refused = profile.entitlements.filter {
            $0.outcome == .refused || $0.outcome == .unknown
        }
        if !refused.isEmpty {
            words.append("refused: " + refused.map(\.key).joined(separator: ", "))
        }
        if words.count == (network ? 1 : 0) { words.append("nothing beyond its own containers") }
        return words
    }

    static let words: [String: String] = [
        "com.apple.security.network.client": "connect out on the host's network (no listening)",
        "com.apple.security.network.server": "connect and listen on the host's network",
        "com.apple.security.application-groups": "share its group containers",
        "com.apple.security.device.camera": "use cameras",
        "com.apple.security.device.audio-input": "record audio",
        "com.apple.security.device.usb": "use USB devices",
        "com.apple.security.cs.allow-jit": "map memory writable and executable (JIT)",
        "com.apple.security.cs.allow-unsigned-executable-memory":
            "map memory writable and executable",
        "com.apple.security.cs.debugger": "ptrace inside its sandbox",
        "com.apple.security.get-task-allow": "be traced inside its sandbox",
    ]

    var openFiles: String {
        profile.rlimits.first { $0.name == "nofile" || $0.name == "RLIMIT_NOFILE" }
            .map { $0.hard.map(String.init) ?? "unlimited" } ?? "default"
    }

    static func cgroupText(_ limits: CgroupLimits) -> String {
        "memory \(limits.memoryMax.map { "\($0 >> 20)M" } ?? "unlimited"), "
            + "tasks \(limits.pidsMax.map(String.init) ?? "unlimited")"
            + (limits.cpuWeight.map { ", cpu weight \($0)" } ?? "")
    }

    static func dataQuotaText(_ quota: DataQuotaStatus?) -> String {
        guard let quota else { return "data container: no limit ([Sandbox] DataQuota= is not set)" }
        let used = quota.usedBytes.map { ", \($0 >> 10)K used" } ?? ""
        return quota.enforced
            ? "data container: \(quota.limitBytes >> 20)M (project quota \(quota.projectID)\(used))"
            : "data container: \(quota.limitBytes >> 20)M NOT ENFORCED: \(quota.reason ?? "unknown")"
    }

    private func row(_ label: String, _ value: String) {
        Output.line("  " + label.padding(toLength: 10, withPad: " ", startingAt: 0) + value)
    }
}
