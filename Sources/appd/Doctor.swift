import AppBundle
import AppContainers
import AppdCLI
import ArgumentParser
import Foundation

struct Doctor: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Check the registry against the disk; with --repair, repair what is safe to repair.",
        discussion: """
            Without --repair it only reports and changes nothing. --repair repairs: leftovers of interrupted operations, containers no app owns, modes of the \
            state root layout, owner and mode of data containers, a missing data container \
            (recreated empty), what an earlier removal could not delete and moved to \
            <root>/quarantine (retried; reported while it stays). Reports, without touching: a \
            missing bundle (reinstall the app), a uid the host now uses for an account, registry \
            corruption. Exits 1 if anything is left unresolved. Also says, for apps with no \
            network, network.client and network.server, whether they launch on this kernel and \
            which layers are reduced (another layer closes the gap) or weakened (WeakerModes=): \
            docs/sandbox-layers.md. And whether the kernel can report what the sandbox refuses \
            to the denial log (audit, Landlock ABI 7, seccomp's actions_logged): docs/denials.md. \
            Last, where appd-oci is and which OCI engines on this host (containerd, podman, \
            docker) are configured to call it (informational): docs/kubernetes.md. On a node \
            without a state root (appd-oci only, no daemon) it checks that node instead: \
            appd-oci, the engines' configuration for it, its own state and the signer policy.
            """
    )

    @OptionGroup var options: GlobalOptions

    @Flag(
        help: "Repair what is safe to repair (without it, doctor only reports and changes nothing)."
    )
    var repair = false

    @Flag(
        help:
            "Check this node for appd-oci only (no daemon state root): what doctor does when the default state root does not exist."
    )
    var oci = false

    @Option(
        name: .customLong("containerd-config"),
        help: ArgumentHelp(
            "containerd's config.toml to check instead of /etc/containerd/config.toml.",
            valueName: "file"), completion: .file())
    var containerdConfig: String?

    @Option(
        name: .customLong("podman-config"),
        help: ArgumentHelp(
            "A containers.conf, or a folder of *.conf, to check instead of podman's default places (repeatable, in order).",
            valueName: "path"), completion: .file())
    var podmanConfig: [String] = []

    @Option(
        name: .customLong("docker-config"),
        help: ArgumentHelp(
            "docker's daemon.json to check instead of /etc/docker/daemon.json.",
            valueName: "file"), completion: .file())
    var dockerConfig: String?

    var engineConfigs: EngineConfigPaths {
        EngineConfigPaths(containerd: containerdConfig, podman: podmanConfig, docker: dockerConfig)
    }

    // What doctor does without --repair; accepted for the scripts written when repairing was
    // the default.
    @Flag(help: .hidden)
    var checkOnly = false

    func validate() throws {
        if oci && repair {
            throw ValidationError("--oci checks a node without a state root: nothing to repair")
        }
        if repair && checkOnly {
            throw ValidationError("--repair and --check-only contradict each other: give one")
        }
    }

    func run() throws {
        // A node that runs apps through appd-oci only has no daemon state root (the default
        // one absent; an explicit --root that does not exist stays an error: a typo).
        let explicitRoot =
            options.root != nil || !(options.environment["APPD_ROOT"] ?? "").isEmpty
        if oci
            || (!repair && !explicitRoot && access(options.stateRoot.path, F_OK) != 0
                && errno == ENOENT)
        {
            try runOCINode()
            return
        }
        try options.run {
            let store = try options.openStore(repair ? .readWrite : .readOnly)
            var report = try store.doctor(repair: repair, onWait: options.waitNotice)
            report.ociRuntime = OCIEngines.check(
                besideExecutable: Self.executableDirectory, paths: engineConfigs)
            if options.json {
                Output.json(report)
            } else {
                for finding in report.findings {
                    let status = finding.repair.map { "repaired: \($0)" } ?? "NEEDS ATTENTION"
                    Output.line("\(finding.subject): \(finding.problem) [\(status)]")
                }
                for summary in report.sandbox {
                    let verdict = summary.launches ? "launch" : "REFUSED"
                    print(
                        "sandbox: apps with \(summary.apps): \(verdict)"
                            + (summary.launches && summary.notes.isEmpty ? " with every layer" : "")
                    )
                    for note in summary.notes {
                        print("    " + note.replacingOccurrences(of: "\n", with: "\n    "))
                    }
                }
                if let denials = report.denialLog {
                    if denials.problems.isEmpty {
                        print(
                            "denial log: the kernel reports Landlock and seccomp denials; appd adds its own"
                        )
                    }
                    for problem in denials.problems { print("denial log: \(problem)") }
                    for note in denials.notes { print("    " + note) }
                }
                if let oci = report.ociRuntime {
                    for line in Self.ociLines(oci) { Output.line(line) }
                }
                let unresolved = report.unresolved.count
                print(
                    "\(report.appsChecked) app(s) checked, \(report.findings.count) finding(s), \(unresolved) unresolved"
                )
            }
            if !report.unresolved.isEmpty { throw ExitCode.failure }
        }
    }

    /// Where the running appd is: a build keeps appd-oci beside it.
    static var executableDirectory: String? {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")).map {
            URL(fileURLWithPath: $0).deletingLastPathComponent().path
        }
    }

    /// `oci runtime: PATH; known to containerd as appd, …`, then its notes indented.
    static func ociLines(_ oci: OCIRuntimeRegistration) -> [String] {
        var line = "oci runtime: "
        line +=
            oci.runtime
            ?? "appd-oci is not installed (looked at \(oci.searched.joined(separator: ", ")))"
        var known: [String] = []
        for engine in oci.engines {
            let names = oci.entries.filter { $0.engine == engine }.map(\.name)
            known.append("\(engine) as \(Array(Set(names)).sorted().joined(separator: ", "))")
        }
        if !known.isEmpty { line += "; known to " + known.joined(separator: ", ") }
        if !oci.unconfigured.isEmpty {
            line += (known.isEmpty ? "; not known to " : "; not to ")
            line += oci.unconfigured.joined(separator: ", ")
        }
        if known.isEmpty && oci.unconfigured.isEmpty {
            line += "; no containerd, podman or docker configuration on this host"
        }
        if known.count < 3 { line += " (docs/kubernetes.md)" }
        return [line] + oci.notes.map { "    " + $0 }
    }
}
