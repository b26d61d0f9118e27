import AppBundle
import AppContainers
import AppdAPI
import AppdBase
import AppdCLI
import AppdConfig
import ArgumentParser
import BundleArchive
import Foundation
import PrintableText
import Sandbox

/// `appd verify IMAGE`: the answer appd-oci's `create` would give for an image on a node with
/// this policy (issue 37), before it is deployed: the image read as an engine reads it
/// (ImageReader), then `AppImageCheck`, the check create itself runs: signature, programs on
/// the host, the `[Signer]` policy, the entrypoint, every file. Exit 0: create would accept it;
/// 1: it would refuse it, with the one line create prints; 2: the image could not be read.
extension Verify {
    /// An image rather than a bundle folder: a transport prefix, a file, or a folder holding
    /// an OCI image layout.
    static func isImage(_ argument: String) -> Bool {
        if ["oci:", "oci-archive:", "docker-archive:", "docker://"].contains(where: {
            argument.hasPrefix($0)
        }) {
            return true
        }
        var info = stat()
        guard stat(argument, &info) == 0 else { return false }
        return info.st_mode & S_IFMT == S_IFREG
            || FileManager.default.fileExists(atPath: "\(argument)/oci-layout")
    }

    func verifyImage() throws {
        let source = ImageReader.Source(parsing: bundle)
        let path = options.configurationSource
        let config: AppdConfiguration
        do {
            config = try AppdConfiguration.load(
                path: path.path, explicit: path.explicit, signers: signers)
        } catch let error as AppdError {
            Output.fail(error, json: options.json)
            throw ExitCode(2)
        }
        let scratch = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let rootfs = "\(scratch)/rootfs"
        let blobs = "\(scratch)/image"
        for folder in [rootfs, blobs] { mkdir(folder, 0o700) }
        let image: ImageReader.Image
        do {
            image = try ImageReader.unpack(
                source, scratch: blobs, into: rootfs, limits: config.bundleLimits,
                tlsVerify: tlsVerify)
        } catch let error as AppdError {
            // A registry or a file that cannot be read is not the image's refusal: an admission
            // check may retry it.
            let unreadable = [.io, .notFound, .unsupported].contains(error.code)
            var view = ImageVerdict(image: nil, refusal: error)
            if unreadable { view.accepted = nil }
            view.print(json: options.json, subject: bundle)
            throw ExitCode(unreadable ? 2 : 1)
        }
        var verdict = ImageVerdict(image: image, refusal: nil)
        var seen: (path: String, host: HostLibraries)?
        do {
            let host = try HostLibraries(
                root: hostRoot ?? "/", systemPaths: config.sandbox.systemPaths)
            guard let found = try AppImageCheck.find(in: rootfs) else {
                throw AppdError(
                    .invalidBundle, "the image holds no Name.app at its root",
                    hint:
                        "build it with appd image Name.app; run other images with --plain or the annotation org.appd.plain=true"
                )
            }
            seen = (found, host)
            // create's order: what names the bundle and its rights, the entrypoint, then
            // every file.
            var check = try AppImageCheck.verify(
                at: found, with: BundleVerifier(config, host: host))
            var bundleView = BundleView(check.bundle)
            bundleView.programs = ProgramsView(check.bundle, host: host)
            bundleView.path = "/" + check.bundle.directoryName
            verdict.bundle = bundleView
            verdict.keyID = check.signature?.keyID
            verdict.trustedAs = config.signing.signers.filter {
                $0.key == check.signature?.publicKey
            }.map(\.name)
            verdict.groups = check.decision?.groups ?? []
            _ = try check.arguments(of: image.arguments, source: "process.args")
            try check.checkContents(limits: config.bundleLimits)
        } catch let error as AppdError {
            verdict.refusal = error
            verdict.accepted = false
            // Refused by the policy or the host: still say what the image holds, if it reads.
            if verdict.bundle == nil, let seen,
                let app = try? AppBundle.open(at: seen.path, limits: config.bundleLimits)
            {
                var view = BundleView(app)
                view.programs = ProgramsView(app, host: seen.host)
                view.path = "/" + app.directoryName
                verdict.bundle = view
            }
        }
        verdict.print(json: options.json, subject: bundle)
        if verdict.accepted != true { throw ExitCode.failure }
    }

    /// A private folder for the image's blobs and its root filesystem, removed afterwards.
    static func temporaryFolder() throws -> String {
        let base =
            ProcessInfo.processInfo.environment["TMPDIR"].flatMap {
                $0.isEmpty ? nil : $0
            } ?? "/tmp"
        var template = Array("\(base)/appd-verify.XXXXXX".utf8CString)
        guard
            template.withUnsafeMutableBufferPointer({ $0.baseAddress.flatMap { mkdtemp($0) } })
                != nil
        else { throw AppdError.system("create a folder in \(base)") }
        return String(decoding: template.prefix { $0 != 0 }.map(UInt8.init), as: UTF8.self)
    }
}

/// `appd verify IMAGE` as it prints it, `--json` included.
struct ImageVerdict: Encodable {
    /// true: create would accept the image; false: it would refuse it (`refusal`); null: the
    /// image could not be read.
    var accepted: Bool?
    var image: ImageReader.Image?
    /// The bundle in the image, as `appd verify Name.app` shows it.
    var bundle: BundleView?
    var keyID: String?
    /// The `[Signer]` sections naming the key.
    var trustedAs: [String] = []
    /// The application groups the signer grants.
    var groups: [String] = []
    /// Why create would refuse it: the one line appd-oci prints.
    var reason: String?
    var error: AppdError?

    init(image: ImageReader.Image?, refusal: AppdError?) {
        self.image = image
        accepted = refusal == nil
        self.refusal = refusal
        // An initializer does not run didSet.
        reason = refusal?.oneLine
        error = refusal
    }

    var refusal: AppdError? {
        didSet {
            reason = refusal?.oneLine
            error = refusal
        }
    }

    enum CodingKeys: String, CodingKey {
        case accepted, image, bundle, keyID, trustedAs, groups, reason, error
    }

    func print(json: Bool, subject: String) {
        if json {
            Output.json(self)
            return
        }
        if let image {
            Output.line(
                "\(subject): image \(image.imageID)\(image.reference.map { " (\($0))" } ?? "")")
            Output.line("  entrypoint  \(image.arguments.joined(separator: " "))")
            if let user = image.user { Output.line("  user        \(user)") }
        }
        if let bundle {
            Output.line("  bundle      \(bundle.path): \(bundle.bundleId) \(bundle.version)")
            if let keyID {
                let trust =
                    trustedAs.isEmpty
                    ? "not trusted here"
                    : "trusted as [Signer \(trustedAs.joined(separator: "], ["))]"
                Output.line("  signature   Ed25519, key \(keyID) (\(trust))")
            } else if accepted == true {
                Output.line("  signature   none (not signed)")
            }
            bundle.programs?.printText()
            bundle.entitlements.printText(indent: "  ")
            for path in bundle.hostExecutables {
                Output.line("  host program \(Printable(path))")
            }
            if !groups.isEmpty { Output.line("  groups      \(groups.joined(separator: ", "))") }
        }
        switch accepted {
        case true?: Output.line("  create      would be accepted by this policy")
        case false?: Output.line("  create      would be refused: \(reason ?? "")")
        case nil: Output.line("  image       could not be read: \(reason ?? "")")
        }
    }
}
