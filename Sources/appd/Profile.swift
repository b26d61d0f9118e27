import AppBundle
import AppContainers
import AppdBase
import AppdCLI
import AppdClient
import ArgumentParser
import Foundation
import Sandbox

struct Profile: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the sandbox an app gets: what it sees, who it runs as, what it may do.",
        discussion: """
            The profile is compiled from the entitlements recorded at install, the [Sandbox] \
            settings of appd.conf and the app's [App ID] override, for this kernel. It is exactly \
            what appd-exec builds at launch. By default a summary of about ten lines; --full \
            prints every mount, Landlock rule, seccomp rule group, limit and variable; --json \
            the whole profile; --launcher the text handed to appd-exec \
            (docs/launcher-protocol.md). --path P says whether and how the app sees the host's \
            P and which mount or Landlock rule decides: a hidden file gives the app ENOENT from \
            its own root, and no denial is logged for it.
            """)

    @OptionGroup var options: GlobalOptions

    @Argument(
        help: ArgumentHelp("The app's bundle id (case does not matter).", valueName: "id"),
        completion: .custom(InstalledAppIDs.complete))
    var id: String

    @Flag(help: "Print the profile in appd-exec's input format.")
    var launcher = false

    @Flag(help: "Print the full profile, not only the summary.")
    var full = false

    @Flag(help: "With --full: list every seccomp rule, not only their groups.")
    var verbose = false

    @Option(
        help: ArgumentHelp(
            "Say whether and how the app sees this host path (hidden, no-access, read-only, read-write) and why.",
            valueName: "path"))
    var path: String?

    func validate() throws {
        if let path, !path.hasPrefix("/") {
            throw ValidationError("--path \(path): give an absolute path, as the host names it")
        }
    }

    func run() throws {
        try options.run {
            let store = try options.openStore(.readWrite)
            let app = try store.app(id)
            var profile = try store.sandboxProfile(for: app)
            profile.dataQuota = store.dataQuotaStatus(for: app)
            if let path {
                let access = profile.access(toHostPath: path)
                if options.json {
                    Output.json(access)
                } else {
                    print(
                        "\(access.path): \(access.verdict.rawValue)"
                            + (access.executable && access.verdict != .hidden
                                && access.verdict != .noAccess ? " (may execute)" : ""))
                    print("  why: \(access.reason)")
                    if access.verdict != .hidden && access.verdict != .noAccess {
                        print(
                            "  also: the file's own owner and mode apply, for the app's uid \(profile.uid)"
                        )
                    }
                }
            } else if launcher {
                print(profile.encoded(), terminator: "")
            } else if options.json {
                Output.json(profile)
            } else if full || verbose {
                ProfileText(profile: profile, verbose: verbose).print()
            } else {
                ProfileSummary(profile: profile, app: app).print()
            }
        }
    }
}

/// The profile for people: the questions an admin asks, each answered in a line or a list.
struct ProfileText {
    var profile: SandboxProfile
    var verbose: Bool

    func print() {
        let p = profile
        let network =
            p.namespaces.contains(.net)
            ? "none (private network namespace, only lo)" : "host network"
        Output.line("\(p.app.bundleID): sandbox profile")
        row(
            "runs as",
            "uid \(p.uid), gid \(p.gid), no capabilities, no_new_privs"
                + (p.groups.isEmpty
                    ? "" : ", groups \(p.groups.map(String.init).joined(separator: " "))"))
        if let override = p.adminOverride {
            row("override", "[App \(p.app.bundleID)] in appd.conf: \(override)")
        }
        row(
            "namespaces",
            p.namespaces.map(\.rawValue).joined(separator: " ") + "  (hostname \(p.hostname))")
        row(
            "network",
            network
                + (p.denyPortBinds
                    ? "; bind to a TCP/UDP port refused (cgroup filter), port 0 allowed" : ""))
        if let ports = p.loopbackPorts { row("loopback", ProfileSummary.loopbackText(ports)) }
        row("code", ProfileSummary.codeText(p))
        row("programs", ProfileSummary.hostProgramsText(p))
        row("executable", p.executable)
        row("working dir", p.workingDirectory)
        section("filesystem (on an empty root)")
        for mount in p.mounts {
            switch mount.kind {
            case .roBind, .roBindTry:
                item(
                    "\(mount.destination)  read-only"
                        + (mount.kind == .roBindTry ? " (if present)" : ""))
            case .rwBind: item("\(mount.destination)  read-write, noexec")
            case .rwBindExec: item("\(mount.destination)  read-write")
            case .devBind: item("\(mount.destination)  device")
            case .symlink: item("\(mount.destination) -> \(mount.source ?? "")")
            case .tmpfs: item("\(mount.destination)  empty tmpfs")
            case .proc: item("\(mount.destination)  private procfs (own pid namespace)")
            case .dev:
                item(
                    "\(mount.destination)  null zero full random urandom tty"
                        + (p.console ? " pts" : ""))
            case .dir: item("\(mount.destination)  directory")
            case .file: item("\(mount.destination)  generated")
            case .fs: item("\(mount.destination)  \(mount.fsType ?? "") (\(mount.options ?? ""))")
            case .mask: item("\(mount.destination)  masked")
            case .roPath: item("\(mount.destination)  made read-only")
            case .node: item("\(mount.destination)  device node \(mount.options ?? "") (nodev)")
            }
        }
        section(
            "landlock"
                + (p.landlock.minimumABI == 0 ? ": OFF" : " (needs ABI \(p.landlock.minimumABI))"))
        for rule in p.landlock.paths {
            item(
                "\(rule.access.rawValue.padding(toLength: 4, withPad: " ", startingAt: 0)) \(rule.path)"
            )
        }
        if !p.landlock.restrictedTCP.isEmpty {
            item(
                "TCP " + p.landlock.restrictedTCP.map(\.rawValue).joined(separator: " and ")
                    + ": denied")
        }
        if !p.landlock.scopes.isEmpty {
            item("scoped: " + p.landlock.scopes.map(\.rawValue).joined(separator: ", "))
        }
        let rules = p.seccomp.rules
        section(
            "seccomp: \(rules.count) rules, foreign syscall ABIs kill the process"
                + (p.seccomp.required ? "" : " (OPTIONAL)"))
        if verbose {
            for rule in rules { item("\(rule.syscall) \(describe(rule)): \(rule.reason)") }
        } else {
            var seen = Set<String>()
            for rule in rules
            where seen.insert(rule.reason).inserted && !rule.reason.hasPrefix("address family") {
                let names = Set(rules.filter { $0.reason == rule.reason }.map(\.syscall)).sorted()
                item("\(names.joined(separator: " ")): \(rule.reason)")
            }
            let families = rules.filter { $0.reason.hasPrefix("address family") }.count
            if families > 0 {
                item(
                    "socket: \(families) address families refused (only unix, inet, inet6, netlink-route)"
                )
            }
        }
        section("limits")
        item("cgroup: " + ProfileSummary.cgroupText(p.cgroupLimits))
        item(ProfileSummary.dataQuotaText(p.dataQuota))
        for limit in p.rlimits {
            item(
                "\(limit.name) \(limit.soft.map(String.init) ?? "unlimited")/\(limit.hard.map(String.init) ?? "unlimited")"
            )
        }
        section("environment (nothing else is inherited)")
        for variable in p.environment { item("\(variable.name)=\(variable.value)") }
        section("entitlements")
        if p.entitlements.isEmpty { item("none requested: the baseline above") }
        for decision in p.entitlements {
            item("\(decision.key): \(decision.outcome.rawValue) — \(decision.effect)")
        }
        if !p.reducedLayers.isEmpty {
            section("REDUCED on this kernel (another layer closes the gap; docs/sandbox-layers.md)")
            for layer in p.reducedLayers { item(layer) }
        }
        if !p.weakenedLayers.isEmpty {
            section("WEAKER SANDBOX (allowed by WeakerModes=)")
            for layer in p.weakenedLayers { item(layer) }
        }
    }

    private func describe(_ rule: SeccompRule) -> String {
        let action: String =
            switch rule.action {
            case .errno(let code): "-> \(errnoName(code))"
            case .log: "-> allowed (logged)"
            }
        let conditions = rule.conditions.map { c in
            let value = "0x" + String(c.value, radix: 16)
            switch c.op {
            case .maskedEqual:
                return "arg\(c.index) & 0x\(String(c.mask ?? 0, radix: 16)) == \(value)"
            case .equal: return "arg\(c.index) == \(value)"
            case .notEqual: return "arg\(c.index) != \(value)"
            case .greater: return "arg\(c.index) > \(value)"
            case .greaterOrEqual: return "arg\(c.index) >= \(value)"
            case .less: return "arg\(c.index) < \(value)"
            }
        }
        return (conditions.isEmpty ? "" : "if " + conditions.joined(separator: " && ") + " ")
            + action
    }

    private func row(_ label: String, _ value: String) {
        Output.line("  " + label.padding(toLength: 12, withPad: " ", startingAt: 0) + value)
    }
    private func section(_ title: String) { Output.line("  \(title):") }
    private func item(_ text: String) { Output.line("    \(text)") }
}
