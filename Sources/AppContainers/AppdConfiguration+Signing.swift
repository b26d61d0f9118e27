import AppBundle
import AppdAPI
import AppdBase
import Foundation

extension AppdConfiguration {
    /// `[Signer NAME]` opens a new signer; the keys that follow fill it in.
    mutating func addSigner(_ section: String, place: String) throws {
        let name = section.dropFirst("Signer".count).trimmingWhitespace()
        guard !name.isEmpty, !name.contains(" ") else {
            throw AppdError(
                .invalidConfig,
                "\(place): [\(section)] needs one word as the signer's name, like [Signer example]")
        }
        guard !signing.signers.contains(where: { $0.name == name }) else {
            throw AppdError(.invalidConfig, "\(place): [Signer \(name)] appears twice")
        }
        signing.signers.append(SigningPolicy.Signer(name: name))
    }

    mutating func setSigning(
        section: String, key: String, value: String, place: String, file: String
    ) throws {
        func bad(_ expected: String) -> AppdError {
            AppdError(.invalidConfig, "\(place): [\(section)] \(key)=\(value) is not \(expected)")
        }
        func patterns() throws -> [String] {
            guard let words = SigningPolicy.validPatterns(value) else {
                throw bad("a list of patterns (exact, a prefix ending in *, or *)")
            }
            return words
        }
        func paths() throws -> [String] {
            let words = try patterns()
            guard words.allSatisfy({ $0 == "*" || $0.hasPrefix("/") }) else {
                throw bad(
                    "a list of absolute paths of programs (exact, a prefix ending in *, or *)")
            }
            return words
        }
        if section == "Signing" {
            switch key {
            case "AllowUnsigned":
                guard let flag = boolean(value) else { throw bad("yes or no") }
                signing.allowUnsigned = flag
            case "UnsignedEntitlements": signing.unsignedEntitlements = try patterns()
            case "UnsignedGroups": signing.unsignedGroups = try patterns()
            case "UnsignedHostExecutables": signing.unsignedHostExecutables = try paths()
            case "LaunchCheckMaxBytes":
                guard let bytes = AppdConfiguration.parseSize(value), bytes >= 0 else {
                    throw bad("a size (a number with an optional K, M, G or T suffix)")
                }
                signing.launchCheckMaxBytes = bytes
            default:
                throw AppdError(
                    .invalidConfig, "\(place): unknown key \(key) in [Signing]",
                    hint: "known keys: " + SigningPolicy.signingKeys.joined(separator: ", "))
            }
            return
        }
        let index = signing.signers.count - 1
        switch key {
        case "Key":
            let directory = Self.directory(of: file)
            do {
                signing.signers[index].key = try SignerKey.load(value, relativeTo: directory)
            } catch let error as AppdError {
                throw AppdError(.invalidConfig, "\(place): [\(section)] Key=: \(error.message)")
            }
        case "BundleIDs": signing.signers[index].bundleIDs = try patterns()
        case "Entitlements": signing.signers[index].entitlements = try patterns()
        case "Groups": signing.signers[index].groups = try patterns()
        case "HostExecutables": signing.signers[index].hostExecutables = try paths()
        default:
            throw AppdError(
                .invalidConfig, "\(place): unknown key \(key) in [\(section)]",
                hint: "known keys: " + SigningPolicy.signerKeys.joined(separator: ", "))
        }
    }
}

/// yes/no/true/false/1/0/on/off, as systemd reads booleans.
private func boolean(_ value: String) -> Bool? {
    switch value.lowercased() {
    case "yes", "true", "1", "on": true
    case "no", "false", "0", "off": false
    default: nil
    }
}
