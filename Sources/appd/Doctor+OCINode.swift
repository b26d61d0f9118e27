import AppContainers
import AppdCLI
import AppdConfig
import ArgumentParser
import Foundation
import Glibc

/// `appd doctor` on a node that runs apps through appd-oci only (docs/kubernetes.md): no
/// daemon, so no state root to check. What such a node needs instead is checked without one:
/// appd-oci itself and the engines that call it (their annotations and cgroup driver), its own
/// state root and uid map, and the signer policy every `create` applies.
extension Doctor {
    struct OCINodeReport: Encodable {
        var stateRoot: String
        var ociRuntime: OCIRuntimeRegistration
        /// appd-oci's `--root` default and how many containers it holds (nil: absent).
        var runtimeRoot: String
        var containers: Int?
        /// Bundle ids the node has given a uid (`/var/lib/appd-oci/uids`).
        var nodeUIDs: Int?
        var signers: [String]
        var allowUnsigned: Bool
        var problems: [String]
    }

    static let ociRuntimeRoot = "/run/appd-oci"
    static let ociUIDMap = "/var/lib/appd-oci/uids"

    func ociNodeReport(configuration: AppdConfiguration) -> OCINodeReport {
        let containers = (try? FileManager.default.contentsOfDirectory(atPath: Self.ociRuntimeRoot))
            .map { $0.filter { !$0.hasPrefix(".") }.count }
        let uids = (try? String(contentsOfFile: Self.ociUIDMap, encoding: .utf8)).map {
            $0.split(separator: "\n").filter { !$0.isEmpty }.count
        }
        let policy = configuration.signing
        var problems: [String] = []
        if policy.signers.isEmpty && !policy.allowUnsigned {
            problems.append(
                "appd.conf has no [Signer] and AllowUnsigned=no: appd-oci refuses every app image (add a [Signer NAME] with Key= and BundleIDs=)"
            )
        }
        let registration = OCIEngines.check(
            besideExecutable: Self.executableDirectory, paths: engineConfigs)
        problems += registration.failures
        if registration.runtime == nil {
            problems.append(
                "appd-oci is not installed (looked at \(registration.searched.joined(separator: ", ")))"
            )
        }
        return OCINodeReport(
            stateRoot: options.stateRoot.path, ociRuntime: registration,
            runtimeRoot: Self.ociRuntimeRoot, containers: containers, nodeUIDs: uids,
            signers: policy.signers.map(\.name), allowUnsigned: policy.allowUnsigned,
            problems: problems)
    }

    /// Prints the report; exits 1 when it holds a problem.
    func runOCINode() throws {
        try options.run {
            let report = ociNodeReport(configuration: try options.loadConfiguration())
            if options.json {
                Output.json(report)
            } else {
                print(
                    "state root: \(report.stateRoot) does not exist: no appd daemon here; checking this node for appd-oci"
                )
                // What needs attention is said once, below.
                var registration = report.ociRuntime
                registration.notes.removeAll { report.problems.contains($0) }
                for line in Self.ociLines(registration) { Output.line(line) }
                print(
                    "appd-oci state: \(report.runtimeRoot): "
                        + (report.containers.map { "\($0) container(s)" }
                            ?? "absent (no container yet)")
                        + "; node uids: "
                        + (report.nodeUIDs.map { "\($0) bundle id(s) in \(Self.ociUIDMap)" }
                            ?? "none given yet"))
                let signers =
                    report.signers.isEmpty ? "no [Signer]" : report.signers.joined(separator: ", ")
                print(
                    "signer policy: \(signers); unsigned apps "
                        + (report.allowUnsigned ? "allowed (AllowUnsigned=yes)" : "refused"))
                for problem in report.problems { Output.line("NEEDS ATTENTION: \(problem)") }
            }
            if !report.problems.isEmpty { throw ExitCode.failure }
        }
    }
}
