import AppdBase
import Crypto
import Foundation
import PrintableText

/// The detached signature of a bundle: `_CodeSignature/Signature`, an Ed25519 signature over
/// `_CodeSignature/CodeResources` by the signer's key (docs/code-signing.md).
///
/// Holding one means the signature is cryptographically sound for the key it embeds; whether
/// that key is trusted, and whether the files still match, is for the caller to check against
/// the configuration (`trusted(by:)`) and the tree (`BundleManifest.diff`).
public struct CodeSignature: Sendable {
    /// The id the Signature file names; always the id of `publicKey`.
    public let keyID: String
    /// The key the Signature file embeds, so `appd verify` can check it without configuration.
    public let publicKey: SignerKey
    public let signature: [UInt8]
    /// The exact bytes signed.
    public let codeResources: Data
    public let resources: BundleManifest

    public var codeResourcesDigest: [UInt8] { Array(SHA256.hash(data: codeResources)) }

    public static let maxSignatureBytes = 64 << 10

    /// What the key signs: a fixed context line and the SHA-256 of CodeResources, so a
    /// signature made for anything else can never pass for a bundle signature.
    static func message(for codeResources: Data) -> Data {
        Data("appd code signature v1\n".utf8) + Data(SHA256.hash(data: codeResources))
    }

    /// The two files to write into `_CodeSignature/` for `manifest`.
    public static func sign(_ manifest: BundleManifest, with identity: SigningIdentity) throws
        -> (codeResources: Data, signature: Data)
    {
        let resources = CodeResources.encode(manifest)
        let signature = try identity.sign(message(for: resources))
        let text = CodeResources.plistDocument(
            """
            \t<key>algorithm</key>
            \t<string>ed25519</string>
            \t<key>keyID</key>
            \t<string>\(identity.publicKey.keyID)</string>
            \t<key>publicKey</key>
            \t<data>\(Data(identity.publicKey.raw).base64EncodedString())</data>
            \t<key>signature</key>
            \t<data>\(Data(signature).base64EncodedString())</data>

            """)
        return (resources, text)
    }

    /// The signature of the bundle at `path`, checked: nil when the bundle has neither file
    /// (unsigned). Throws `invalidBundle` naming the file for one without the other, a
    /// malformed or truncated file, a key id that is not the embedded key's, or a signature
    /// that does not verify over this CodeResources.
    public static func read(bundleAt path: String, layout: BundleLayout) throws -> CodeSignature? {
        let resourcesPath = layout.codeResourcesPath
        let signaturePath = layout.signaturePath
        let resources = try readInside(path, resourcesPath, maxBytes: CodeResources.maxBytes)
        let signatureFile = try readInside(path, signaturePath, maxBytes: maxSignatureBytes)
        func bad(_ file: String, _ message: String) -> AppdError {
            AppdError(
                .invalidBundle, "the code signature is invalid",
                subject: .init(.bundle, view: path), problems: [BundleProblem(file, message)])
        }
        switch (resources, signatureFile) {
        case (nil, nil): return nil
        case (nil, _):
            throw bad(
                resourcesPath,
                "is missing, but \(signaturePath) exists; sign the bundle again (appd sign)")
        case (_, nil):
            throw bad(
                signaturePath,
                "is missing, but \(resourcesPath) exists; sign the bundle again (appd sign)")
        case (let resources?, let signatureFile?):
            let fields: [String: PlistValue]
            do {
                fields = try PropertyListReader.dictionary(
                    from: signatureFile, maxBytes: maxSignatureBytes)
            } catch {
                throw bad(signaturePath, "is malformed or truncated: it \(error.message)")
            }
            guard fields["algorithm"] == .string("ed25519") else {
                throw bad(signaturePath, "algorithm must be ed25519")
            }
            guard case .string(let keyID)? = fields["keyID"],
                case .data(let rawKey)? = fields["publicKey"],
                case .data(let signature)? = fields["signature"]
            else {
                throw bad(
                    signaturePath, "must hold keyID (string), publicKey (data) and signature (data)"
                )
            }
            guard let key = try? SignerKey(raw: Array(rawKey)) else {
                throw bad(signaturePath, "publicKey is not a 32-byte Ed25519 key")
            }
            guard keyID == key.keyID else {
                throw bad(
                    signaturePath,
                    "keyID \(Printable(keyID)) is wrong: the embedded public key's id is \(key.keyID)"
                )
            }
            guard signature.count == 64 else {
                throw bad(
                    signaturePath,
                    "signature is \(signature.count) bytes; an Ed25519 signature is 64 (truncated?)"
                )
            }
            guard key.isValidSignature(Array(signature), for: message(for: resources)) else {
                throw bad(
                    signaturePath,
                    "does not verify: \(resourcesPath) is not what key \(keyID) signed (edited after signing, or this Signature belongs to another bundle)"
                )
            }
            let manifest = try CodeResources.decode(resources, file: resourcesPath)
            return CodeSignature(
                keyID: keyID, publicKey: key, signature: Array(signature),
                codeResources: resources, resources: manifest)
        }
    }

    /// Reads `relative` below `bundle` without following any symlink on the way; nil if some
    /// component does not exist.
    static func readInside(_ bundle: String, _ relative: String, maxBytes: Int) throws -> Data? {
        let root = AppdError.Subject(.bundle, view: bundle)
        let file = AppdError.Subject(.bundle, relative, view: bundle)
        var fd = open(bundle, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw AppdError.system("open", subject: root) }
        let parts = relative.split(separator: "/").map(String.init)
        for (index, part) in parts.enumerated() {
            let last = index == parts.count - 1
            let next = openat(
                fd, part, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (last ? O_NONBLOCK : O_DIRECTORY))
            let failure = errno
            close(fd)
            guard next >= 0 else {
                if failure == ENOENT { return nil }
                if failure == ELOOP || failure == ENOTDIR {
                    throw AppdError(
                        .invalidBundle, "is not readable as a regular file", subject: file,
                        problems: [
                            BundleProblem(
                                parts[...index].joined(separator: "/"), "must not be a symlink")
                        ])
                }
                throw AppdError.system("open", errno: failure, subject: file)
            }
            fd = next
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw AppdError(
                .invalidBundle, "is not a regular file", subject: file,
                problems: [BundleProblem(relative, "must be a regular file")])
        }
        guard Int(info.st_size) <= maxBytes else {
            throw AppdError(
                .invalidBundle, "is too large", subject: file,
                problems: [
                    BundleProblem(
                        relative, "is \(info.st_size) bytes, over the limit of \(maxBytes)")
                ])
        }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while data.count <= maxBytes {
            let n = buffer.withUnsafeMutableBytes { buffer in
                retryingInterrupts { Glibc.read(fd, buffer.baseAddress, buffer.count) }
            }
            if n == 0 { break }
            if n < 0 { throw AppdError.system("read", subject: file) }
            data.append(contentsOf: buffer[..<n])
        }
        return data
    }
}
