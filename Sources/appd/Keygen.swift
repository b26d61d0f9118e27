import AppBundle
import AppdBase
import AppdCLI
import ArgumentParser
import Foundation

struct Keygen: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make an Ed25519 signing key for appd sign.",
        discussion: """
            Writes DIR/NAME.signing-key (the private key, mode 0600: keep it secret) and \
            DIR/NAME.public-key (give it to the admins of the hosts that should trust you; they \
            name it in a [Signer NAME] section of appd.conf, Key=). Refuses to overwrite either. \
            The key id is the first 16 hex digits of the SHA-256 of the public key. \
            docs/code-signing.md.
            """
    )

    @OptionGroup var options: GlobalOptions

    @Option(help: ArgumentHelp("Directory to write the key files into.", valueName: "dir"))
    var out: String = "."

    @Option(help: ArgumentHelp("The key's name, used for the file names.", valueName: "name"))
    var name: String = "appd-signing"

    func run() throws {
        try options.run {
            guard !name.isEmpty, !name.contains("/"), !name.hasPrefix(".") else {
                throw AppdError(.invalidConfig, "--name '\(name)' must be a plain file name")
            }
            let identity = SigningIdentity.generate(name: name)
            let privatePath = "\(out)/\(name).signing-key"
            let publicPath = "\(out)/\(name).public-key"
            try Self.create(privatePath, identity.privateKeyFile, mode: 0o600)
            do { try Self.create(publicPath, identity.publicKeyFile, mode: 0o644) } catch {
                unlink(privatePath)
                throw error
            }
            let view = KeygenView(
                keyID: identity.publicKey.keyID, name: name, privateKey: privatePath,
                publicKey: publicPath)
            if options.json {
                Output.json(view)
            } else {
                print("key id       \(view.keyID)")
                print("private key  \(privatePath)  (keep it secret)")
                print("public key   \(publicPath)")
                // appd.conf resolves a relative Key= from its own folder, not from here.
                let absolute = URL(fileURLWithPath: publicPath).standardizedFileURL.path
                print(
                    """
                    trust it on a host with, in appd.conf (then systemctl reload appd):
                      [Signer \(name)]
                      Key=\(absolute)
                      # the bundle ids it may sign, e.g. com.example.*
                      BundleIDs=*
                      # the entitlements it may grant besides the sandbox (empty: none), e.g.
                      # com.apple.security.network.client com.apple.security.application-groups
                      Entitlements=
                    """)
            }
        }
    }

    /// Creates `path` exclusively with `mode` (no umask, no symlink followed) and writes `data`.
    static func create(_ path: String, _ data: Data, mode: mode_t) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else {
            throw AppdError.system(
                "create \(path)", hint: errno == EEXIST ? "choose another --name or --out" : nil)
        }
        defer { close(fd) }
        guard fchmod(fd, mode) == 0 else { throw AppdError.system("chmod \(path)") }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == data.count, fsync(fd) == 0 else { throw AppdError.system("write \(path)") }
    }
}

struct KeygenView: Encodable {
    var keyID: String
    var name: String
    var privateKey: String
    var publicKey: String
}
