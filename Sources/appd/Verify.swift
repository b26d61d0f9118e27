import AppBundle
import AppContainers
import AppdAPI
import AppdBase
import AppdCLI
import AppdConfig
import ArgumentParser
import Foundation
import PrintableText
import Sandbox

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Check a bundle, or an image against a policy, offline; print what it is, or every problem found.",
        discussion: """
            Changes nothing and needs no privileges. Hashes every file and compares the tree \
            with the signed _CodeSignature/CodeResources, naming each file added, removed or \
            changed since signing. Exits 1 if the bundle has problems or its signature does not \
            match it. Also says whether this host's appd.conf trusts the signer for this bundle \
            and its entitlements (what install would decide), without failing on it. Reads \
            every program the bundle carries (its executable, other files with an execute bit, \
            ELF files in Frameworks/) and says what each needs (architecture, loader, \
            libraries, a script's interpreter) and where this host, or the one whose \
            filesystem is at --host-root, has it; exits 1 if something is missing, as install \
            would refuse the bundle. Given an image instead (an OCI image layout folder or \
            oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE, or docker://REF read \
            with skopeo), reads it as an engine does (every digest checked) and gives the \
            answer appd-oci create would give on a node with this appd.conf (--config) and \
            signers.d (--signers): exit 0 if it would run, 1 if create would refuse it (with \
            the line create prints), 2 if the image or the policy could not be read.
            """
    )

    @OptionGroup var options: GlobalOptions

    @Argument(
        help: ArgumentHelp(
            "The bundle directory, or an image (oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE, docker://REF).",
            valueName: "Name.app|image"), completion: .directory)
    var bundle: String

    @Option(
        help: ArgumentHelp(
            "For an image: read the [Signer] drop-ins of DIR instead of the signers.d beside appd.conf.",
            valueName: "DIR"), completion: .directory)
    var signers: String?

    @Option(
        name: .customLong("tls-verify"),
        help: ArgumentHelp(
            "For docker://: check the registry's TLS certificate (false: plain HTTP or any certificate).",
            valueName: "true|false"))
    var tlsVerify: Bool = true

    @Option(
        name: .customLong("host-root"),
        help: ArgumentHelp(
            "Check the programs against the host whose filesystem is at DIR (a mounted image, a chroot) instead of this one.",
            valueName: "DIR"), completion: .directory)
    var hostRoot: String?

    func run() throws {
        if Self.isImage(bundle) { return try verifyImage() }
        guard signers == nil else {
            throw ValidationError(
                "--signers is for an image; a bundle is checked against appd.conf")
        }
        try options.run {
            let (config, verified) = try Self.check(bundle, options: options)
            let app = verified.bundle
            var view = BundleView(app)
            let host = try HostLibraries(
                root: hostRoot ?? "/", systemPaths: config.sandbox.systemPaths)
            view.programs = ProgramsView(app, host: host)
            // The registry says which key owns each application group; without it (not root,
            // or no state root yet) verify says it could not check.
            let store: AppStore?
            do { store = try options.openStore(.readOnly) } catch { store = nil }
            view.signature = SignatureView(
                verified, policy: config.signing, store: store,
                root: options.stateRoot.path)
            if options.json { Output.json(view) } else { view.printText() }
            if let programs = view.programs, !programs.problems.isEmpty {
                throw ExitCode.failure
            }
        }
    }
}

extension Verify {
    /// What verify checks, for `appd image` too: the bundle is valid and every file matches its
    /// code signature (or it has none), else an error listing each problem. Install's verifier
    /// (`BundleVerifier.verify`), without the host and the policy: verify reports those.
    static func check(_ bundle: String, options: GlobalOptions) throws -> (
        AppdConfiguration, VerifiedBundle
    ) {
        let config = try options.loadConfiguration()
        return (config, try BundleVerifier(limits: config.bundleLimits).verify(at: bundle))
    }
}

/// A validated bundle as `verify` prints it.
struct BundleView: Encodable {
    var valid = true
    var path: String
    var bundleId: String
    var name: String
    var version: String
    var shortVersion: String?
    var executable: String
    var layout: String
    var fileCount: Int
    var totalBytes: Int64
    var entitlements: APIEntitlements
    /// `AppdHostExecutables`: the host programs it may run; those of them that run code they
    /// are given (`interpreters`) let it run code that was never signed.
    var hostExecutables: [String]
    var interpreters: [String]
    /// `CFBundleURLTypes` and `CFBundleDocumentTypes`: what it opens (its signer must grant
    /// each claim: `refusal` of the signature says when not).
    var urlSchemes: [String]
    var documentTypes: [APIDocumentType]
    var warnings: [BundleProblem]
    var signature: SignatureView?
    var programs: ProgramsView?

    init(_ bundle: AppBundle) {
        path = bundle.path
        bundleId = bundle.info.identifier.rawValue
        name = bundle.info.title
        version = bundle.info.version.rawValue
        shortVersion = bundle.info.shortVersion
        executable = bundle.executablePath
        layout = bundle.layout.rawValue
        fileCount = bundle.fileCount
        totalBytes = bundle.totalBytes
        entitlements = APIEntitlements(bundle.entitlements)
        hostExecutables = bundle.info.hostExecutables
        interpreters = hostExecutables.filter(HostExecutables.isInterpreter)
        let handlers = bundle.info.handlers
        urlSchemes = handlers.schemes
        documentTypes = handlers.documentTypes.map(APIDocumentType.init)
        warnings = bundle.warnings
    }

    func printText() {
        Output.line("\(path): valid \(layout) bundle")
        Output.line("  bundle id   \(bundleId)")
        Output.line("  name        \(name)")
        Output.line("  version     \(shortVersion.map { "\($0) (\(version))" } ?? version)")
        Output.line("  executable  \(executable)")
        Output.line("  files       \(fileCount) (\(Output.bytes(totalBytes)))")
        signature?.printText()
        programs?.printText()
        entitlements.printText(indent: "  ")
        for path in hostExecutables {
            let note =
                interpreters.contains(path)
                ? " (an interpreter: the app may run code that was never signed through it)" : ""
            Output.line("  host program \(Printable(path))\(note)")
        }
        if !urlSchemes.isEmpty {
            Output.line("  opens URLs  \(urlSchemes.map { $0 + ":" }.joined(separator: " "))")
        }
        for type in documentTypes { Output.line("  opens       \(type.text)") }
        for warning in warnings { Output.line("  warning: \(warning)") }
    }
}

/// The code signature as `verify` prints it: sound and matching (or verify fails), and what this
/// host's policy would make of it.
struct SignatureView: Encodable {
    var signed: Bool
    var keyID: String?
    /// The `[Signer]` sections of appd.conf naming the key.
    var trustedAs: [String]
    /// nil: install would accept the signature and the entitlements; else why not.
    var refusal: String?
    /// Application groups the policy grants; install also needs each to be unowned or owned
    /// by this key, which `refusal` reports when the registry could be read.
    var groups: [String] = []
    /// Why the group owners could not be checked (the registry is root's), if so.
    var groupOwnersUnchecked: String?

    init(_ verified: VerifiedBundle, policy: SigningPolicy, store: AppStore?, root: String) {
        signed = verified.signature != nil
        keyID = verified.signature?.keyID
        trustedAs = policy.signers.filter { $0.key == verified.signature?.publicKey }.map(\.name)
        let id = verified.bundle.info.identifier.rawValue
        do {
            // What install would decide, asked as install's verifier asks it.
            var decided = verified
            try BundleVerifier(limits: BundleLimits(), signing: policy).authorize(&decided)
            let decision = decided.decision
            groups = decision?.groups ?? []
            if let store, let decision {
                try store.checkGroupOwners(decision.groups, keyID: decision.keyID, bundleID: id)
                try store.checkGroupLimits(decision.groups, keyID: decision.keyID, bundleID: id)
            } else if !groups.isEmpty {
                groupOwnersUnchecked = "reading the registry of \(root) needs root"
            }
        } catch {
            refusal = (error as? AppdError)?.message ?? "\(error)"
        }
    }

    func printText() {
        if let keyID {
            let trust =
                trustedAs.isEmpty
                ? "not trusted here"
                : "trusted here as [Signer \(trustedAs.joined(separator: "], ["))]"
            Output.line(
                "  signature   Ed25519, key \(keyID) (\(trust)); every file matches CodeResources")
        } else {
            Output.line("  signature   none (not signed)")
        }
        Output.line(
            "  install     "
                + (refusal.map { "would be refused: \($0)" }
                    ?? "would be accepted by this host's policy"))
        if refusal == nil, !groups.isEmpty {
            Output.line(
                "  groups      \(groups.joined(separator: ", "))"
                    + (groupOwnersUnchecked.map { " (owners not checked: \($0))" } ?? ""))
        }
    }
}

/// The bundle's programs as `verify` prints them: what each needs and where the host has it.
struct ProgramsView: Encodable {
    /// "this host" or "the host at DIR".
    var host: String
    var hostArchitecture: String
    var programs: [ProgramNeeds]
    /// Why install would refuse the bundle on that host; empty: every program can run there.
    var problems: [BundleProblem]

    /// UIRequiredDeviceCapabilities entries that mean nothing on Linux.
    var ignoredCapabilities: [String]

    init(_ bundle: AppBundle, host: HostLibraries) {
        self.host = host.name
        hostArchitecture = host.architecture
        programs = bundle.programNeeds(on: host)
        problems =
            DeviceCapabilities.problems(
                bundle.info, hostArchitecture: host.architecture, hostName: host.name
            ).map { BundleProblem(bundle.layout.infoPlistPath, $0) }
            + bundle.unnamedInterpreters + AppBundle.hostProblems(programs, hostName: host.name)
        ignoredCapabilities = DeviceCapabilities.ignored(bundle.info)
    }

    func printText() {
        for program in programs {
            Output.line("  program     \(Printable(program.path)): \(program.format)")
            for need in program.needs where need.kind != .architecture {
                let found =
                    need.foundAt.map {
                        $0.hasPrefix("bundle:") ? "in the bundle, \($0.dropFirst(7))" : $0
                    }
                    ?? "MISSING"
                Output.line(
                    "                \(need.kind.rawValue) \(Printable(need.name)): \(Printable(found))"
                )
            }
        }
        if !ignoredCapabilities.isEmpty {
            let names = ignoredCapabilities.map { Printable($0).description }
            Output.line(
                "  capabilities \(names.joined(separator: ", ")): no effect on Linux (UIRequiredDeviceCapabilities)"
            )
        }
        if problems.isEmpty {
            Output.line(
                "  runs        on \(host) (\(hostArchitecture)): every program has what it needs")
        } else {
            Output.line("  runs        NOT on \(host) (\(hostArchitecture)):")
            for problem in problems { Output.line("                \(problem)") }
        }
    }
}
