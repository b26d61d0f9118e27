import AppBundle
import AppContainers
import AppdBase
import AppdCLI
import AppdConfig
import ArgumentParser
import BundleArchive
import Foundation

struct Image: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a container image (a docker-archive) holding a signed bundle.",
        discussion: """
            Offline, needs no privileges and no image builder. Verifies the bundle as verify \
            does (a bundle that does not match its signature is refused; an unsigned one unless \
            [Signing] AllowUnsigned=yes, as install decides), then writes FILE: a docker-archive \
            that docker load, podman load and ctr images import take (--format oci: an OCI \
            image layout in a tar, for oci-archive:FILE), one layer holding the \
            bundle at /Name.app (owned by 0:0, modes as in the bundle), for the architecture \
            its programs are built for (refused if they disagree), its entrypoint \
            /Name.app/<CFBundleExecutable>, labels org.appd.bundle-id, org.appd.version and \
            org.appd.signer-key. The same bundle gives the same bytes. FILE is replaced \
            atomically; on an error nothing is written. docs/oci-image.md.
            """
    )

    @OptionGroup var options: GlobalOptions

    @Argument(
        help: ArgumentHelp("The bundle directory.", valueName: "Name.app"), completion: .directory)
    var bundle: String

    @Option(name: .shortAndLong, help: ArgumentHelp("The archive to write.", valueName: "file"))
    var output: String

    @Option(
        help: ArgumentHelp(
            "The image's name and tag (default: appd/<bundle id in lower case>:<CFBundleShortVersionString>).",
            valueName: "name:tag"))
    var tag: String?

    @Option(
        help: ArgumentHelp(
            "docker (a docker-archive: docker load, podman load, ctr images import) or oci (an OCI image layout in a tar, for oci-archive:FILE).",
            valueName: "docker|oci")
    )
    var format: String = "docker"

    func run() throws {
        try options.run {
            guard let archiveFormat = ImageArchive.Format(rawValue: format) else {
                throw AppdError(
                    .badRequest, "--format '\(format)': the formats are docker and oci")
            }
            // A --tag the engines cannot read is a usage mistake: said before the bundle is read.
            let named = try tag.map { try ImageReference(parsing: $0) }
            let (config, check) = try Verify.check(bundle, options: options)
            let app = check.bundle
            let id = app.info.identifier.rawValue
            let version = app.info.shortVersion ?? app.info.version.rawValue
            if check.signature == nil {
                // What install decides for an unsigned bundle: refused unless AllowUnsigned=yes
                // (and then only with the entitlements an unsigned app may have).
                var unsigned = check
                try BundleVerifier(config, host: nil).authorize(&unsigned)
            }
            let reference =
                try named ?? ImageReference.defaultReference(bundleID: id, version: version)
            // A script the sandbox would not run is refused wherever the image goes.
            if let unnamed = app.unnamedInterpreters.first {
                throw AppdError(
                    .invalidBundle, "\(app.directoryName): \(unnamed)",
                    problems: app.unnamedInterpreters.count > 1 ? app.unnamedInterpreters : [],
                    hint: "docs/info-plist.md, AppdHostExecutables")
            }
            // The image is for the CPU its programs are built for, whichever host writes it.
            let architectures = app.architectures
            if architectures.count > 1 {
                let each = architectures.map { "\($0.program) is \($0.architecture)" }
                throw AppdError(
                    .invalidBundle,
                    "\(app.directoryName): its programs are built for different architectures (\(each.joined(separator: ", "))); an image is for one",
                    hint: "build every program and framework for the same CPU")
            }
            if let only = architectures.first,
                ELFMachine.known.allSatisfy({ $0.arch != only.architecture })
            {
                throw AppdError(
                    .invalidBundle,
                    "\(app.directoryName): \(only.program) is built for \(only.architecture), which has no image architecture"
                )
            }
            let description = ImageDescription(
                bundleFolder: app.directoryName, executable: app.executablePath,
                reference: reference,
                labels: [
                    "org.appd.bundle-id": id, "org.appd.version": version,
                    "org.appd.bundle-version": app.info.version.rawValue,
                    "org.appd.signer-key": check.signature?.keyID ?? "unsigned",
                ],
                architecture: architectures.first?.architecture ?? ELFMachine.hostArchitecture,
                created: try Self.created(app, limits: config.bundleLimits),
                user: "\(AppImageCheck.imageUser):\(AppImageCheck.imageUser)")
            let display =
                !options.json && isatty(STDERR_FILENO) == 1
                ? UploadProgress(totals: (app.fileCount, app.totalBytes), verb: "writing") : nil
            defer { display?.finish() }
            let written = try ImageArchive.write(
                archiveFormat, bundleAt: app.path, description: description, to: output,
                onFile: display.map { display in
                    { size in
                        display.file(size)
                        display.sent(Int(clamping: size))
                    }
                })
            display?.finish()
            let result = ImageResult(
                file: output, tag: reference.description,
                imageID: "sha256:\(written.configDigest)",
                layerDigest: "sha256:\(written.layerDigest)", entrypoint: description.entrypoint)
            if options.json {
                Output.json(result)
            } else {
                Output.line("Wrote \(output): \(result.tag), image \(result.imageID)")
            }
        }
    }
}

extension Image {
    /// The image's `created`, chosen so the same bundle gives the same bytes: the
    /// `SOURCE_DATE_EPOCH` of reproducible builds if set, else the newest modification time of
    /// a file in the bundle (its signature, for a signed one: signing writes it last).
    static func created(_ app: AppBundle, limits: BundleLimits) throws -> String {
        if let text = ProcessInfo.processInfo.environment["SOURCE_DATE_EPOCH"], !text.isEmpty {
            // Up to 9999-12-31T23:59:59Z, as RFC 3339 can spell it.
            guard text.utf8.allSatisfy({ (48...57).contains($0) }), let seconds = Int64(text),
                seconds <= 253_402_300_799
            else {
                throw AppdError(
                    .badRequest,
                    "SOURCE_DATE_EPOCH '\(text)' is not a number of seconds since 1970 (at most 253402300799)"
                )
            }
            return UTCTime(secondsSince1970: seconds).description
        }
        var newest = NewestFile()
        _ = try BundleWalker.walk(app.path, limits: limits, visitor: &newest)
        return UTCTime(secondsSince1970: newest.seconds).description
    }
}

/// The newest `st_mtime` of the regular files of a walk.
struct NewestFile: BundleVisitor {
    var seconds: Int64 = 0

    mutating func enterDirectory(_ entry: BundleEntry, fd: Int32) throws {}
    mutating func leaveDirectory(_ entry: BundleEntry, fd: Int32) throws {}
    mutating func visitSymlink(_ entry: BundleEntry) throws {}
    mutating func visitFile(_ entry: BundleEntry, fd: Int32) throws {
        var info = stat()
        if fstat(fd, &info) == 0 { seconds = max(seconds, Int64(info.st_mtim.tv_sec)) }
    }
}

/// `appd image --json`.
struct ImageResult: Encodable {
    var file: String
    var tag: String
    var imageID: String
    var layerDigest: String
    var entrypoint: String
}
