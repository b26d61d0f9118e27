import AppdBase
import Crypto
import Foundation

/// A signer's Ed25519 public key and its key id: the first 16 hex digits of the SHA-256 of the
/// raw 32-byte key. The id only names the key; trust always compares the key itself.
public struct SignerKey: Sendable, Hashable {
    public let raw: [UInt8]

    public init(raw: [UInt8]) throws {
        guard raw.count == 32, (try? Curve25519.Signing.PublicKey(rawRepresentation: raw)) != nil
        else {
            throw AppdError(.invalidConfig, "an Ed25519 public key is 32 bytes, not \(raw.count)")
        }
        self.raw = raw
    }

    /// A key Crypto just produced.
    init(checked raw: [UInt8]) { self.raw = raw }

    public var keyID: String { Self.keyID(of: raw) }

    static func keyID(of raw: [UInt8]) -> String {
        String(ContentHasher.hex(Array(SHA256.hash(data: raw))).prefix(16))
    }

    func isValidSignature(_ signature: [UInt8], for message: Data) -> Bool {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: raw) else {
            return false
        }
        return key.isValidSignature(signature, for: message)
    }

    /// `ed25519:BASE64` (a key written inline in appd.conf), or the path of a public key file.
    public static func load(_ value: String, relativeTo directory: String) throws -> SignerKey {
        if value.hasPrefix("ed25519:") {
            guard let raw = Data(base64Encoded: String(value.dropFirst(8))) else {
                throw AppdError(.invalidConfig, "'\(value)' is not ed25519: followed by base64")
            }
            return try SignerKey(raw: Array(raw))
        }
        let path = value.hasPrefix("/") ? value : "\(directory)/\(value)"
        guard let data = FileManager.default.contents(atPath: path) else {
            throw AppdError(.invalidConfig, "the public key file \(path) is missing or unreadable")
        }
        return try KeyFile.decode(data, file: path).publicKey
    }
}

/// A private signing key, as `appd keygen` writes it and `appd sign --key` reads it.
public struct SigningIdentity {
    public let name: String
    let privateKey: Curve25519.Signing.PrivateKey
    public let publicKey: SignerKey

    public static func generate(name: String) -> SigningIdentity {
        let key = Curve25519.Signing.PrivateKey()
        return SigningIdentity(
            name: name, privateKey: key,
            publicKey: SignerKey(checked: Array(key.publicKey.rawRepresentation)))
    }

    init(name: String, privateKey: Curve25519.Signing.PrivateKey, publicKey: SignerKey) {
        self.name = name
        self.privateKey = privateKey
        self.publicKey = publicKey
    }

    public static func load(path: String) throws -> SigningIdentity {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw AppdError(.notFound, "the signing key \(path) is missing or unreadable")
        }
        let file = try KeyFile.decode(data, file: path)
        guard let identity = file.identity else {
            throw AppdError(
                .invalidConfig,
                "\(path) is a public key; signing needs the private key (NAME.signing-key)")
        }
        return identity
    }

    /// The private key file (keep it 0600) and the public key file (give it to admins).
    public var privateKeyFile: Data {
        KeyFile(
            format: KeyFile.privateFormat, name: name, keyID: publicKey.keyID,
            publicKey: Data(publicKey.raw).base64EncodedString(),
            privateKey: privateKey.rawRepresentation.base64EncodedString()
        ).encoded
    }

    public var publicKeyFile: Data {
        KeyFile(
            format: KeyFile.publicFormat, name: name, keyID: publicKey.keyID,
            publicKey: Data(publicKey.raw).base64EncodedString(), privateKey: nil
        ).encoded
    }

    func sign(_ message: Data) throws -> [UInt8] { Array(try privateKey.signature(for: message)) }
}

/// The key files: small JSON documents, so a person can read the key id and the name.
///
///     {"format": "appd-signing-key-1", "algorithm": "ed25519", "name": "dev",
///      "keyID": "3f9c0b1e2d4a5c6b", "publicKey": "BASE64", "privateKey": "BASE64"}
///
/// The public file is the same without `privateKey` and with format `appd-public-key-1`.
struct KeyFile: Codable {
    static let privateFormat = "appd-signing-key-1"
    static let publicFormat = "appd-public-key-1"

    var format: String
    var algorithm = "ed25519"
    var name: String
    var keyID: String
    var publicKey: String
    var privateKey: String?

    init(format: String, name: String, keyID: String, publicKey: String, privateKey: String?) {
        self.format = format
        self.name = name
        self.keyID = keyID
        self.publicKey = publicKey
        self.privateKey = privateKey
    }

    var encoded: Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return ((try? encoder.encode(self)) ?? Data()) + Data("\n".utf8)
    }

    static func decode(_ data: Data, file: String) throws -> (
        publicKey: SignerKey, identity: SigningIdentity?
    ) {
        func bad(_ why: String) -> AppdError { AppdError(.invalidConfig, "\(file): \(why)") }
        guard let key = try? JSONDecoder().decode(KeyFile.self, from: data) else {
            throw bad("not an appd key file (JSON with format, algorithm, keyID, publicKey)")
        }
        guard key.format == privateFormat || key.format == publicFormat, key.algorithm == "ed25519"
        else {
            throw bad(
                "format '\(key.format)' / algorithm '\(key.algorithm)' is not an appd Ed25519 key")
        }
        guard let raw = Data(base64Encoded: key.publicKey) else {
            throw bad("publicKey is not base64")
        }
        let publicKey = try SignerKey(raw: Array(raw))
        guard publicKey.keyID == key.keyID else {
            throw bad("keyID \(key.keyID) does not match the key (its id is \(publicKey.keyID))")
        }
        guard key.format == privateFormat else { return (publicKey, nil) }
        guard let encoded = key.privateKey, let seed = Data(base64Encoded: encoded),
            let privateKey = try? Curve25519.Signing.PrivateKey(rawRepresentation: seed)
        else { throw bad("privateKey is missing or not a 32-byte base64 Ed25519 key") }
        guard Array(privateKey.publicKey.rawRepresentation) == publicKey.raw else {
            throw bad("privateKey and publicKey are not a pair")
        }
        return (
            publicKey, SigningIdentity(name: key.name, privateKey: privateKey, publicKey: publicKey)
        )
    }
}
