import AppBundle
import AppdBase
import AppdCLI
import ArgumentParser
import Foundation

struct Sign: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sign a bundle: write _CodeSignature/CodeResources and _CodeSignature/Signature.",
        discussion: """
            Validates the bundle, hashes every file (SHA-256), records symlinks by target, and \
            signs the result with the Ed25519 key from appd keygen. Signing again replaces the \
            signature. Refuses names that differ only by case or Unicode normalization. Sign \
            last: any change to the bundle afterwards makes install refuse it. \
            docs/code-signing.md.
            """
    )

    @OptionGroup var options: GlobalOptions

    @Option(
        help: ArgumentHelp(
            "The private key file (NAME.signing-key from appd keygen).", valueName: "key"))
    var key: String

    @Argument(
        help: ArgumentHelp("The bundle directory.", valueName: "Name.app"), completion: .directory)
    var bundle: String

    func run() throws {
        try options.run {
            let config = try options.loadConfiguration()
            let identity = try SigningIdentity.load(path: key)
            let app = try AppBundle.open(at: bundle, limits: config.bundleLimits)
            let (manifest, resources, signature) = try app.sign(
                with: identity, limits: config.bundleLimits)
            let directory = "\(app.path)/\(app.layout.signatureDirectory)"
            if mkdir(directory, 0o755) != 0 && errno != EEXIST {
                throw AppdError.system("mkdir \(directory)")
            }
            var info = stat()
            guard lstat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
                throw AppdError(.invalidBundle, "\(directory) is not a directory (a symlink?)")
            }
            try Self.replace("\(app.path)/\(app.layout.codeResourcesPath)", with: resources)
            try Self.replace("\(app.path)/\(app.layout.signaturePath)", with: signature)
            let view = SignView(
                path: app.path, bundleId: app.info.identifier.rawValue,
                keyID: identity.publicKey.keyID, entries: manifest.entries.count)
            if options.json {
                Output.json(view)
            } else {
                print(
                    "\(view.path): signed \(view.bundleId) with key \(view.keyID) (\(view.entries) entries)"
                )
            }
        }
    }

    /// Writes `data` beside `path` and renames it over: a reader sees the old file or the new.
    static func replace(_ path: String, with data: Data) throws {
        let temporary = path + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw AppdError.system("create \(temporary)") }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let failed = written != data.count || fchmod(fd, 0o644) != 0
        close(fd)
        guard !failed, rename(temporary, path) == 0 else {
            let error = AppdError.system("write \(path)")
            unlink(temporary)
            throw error
        }
    }
}

struct SignView: Encodable {
    var path: String
    var bundleId: String
    var keyID: String
    var entries: Int
}
