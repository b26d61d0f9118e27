import AppdBase
import Foundation

/// The part of an OCI bundle's `config.json` (runtime-spec 1.0) appd-oci reads. Every field is
/// optional where the spec lets it be: a field appd-oci does not know is ignored, a field it
/// knows with a value it cannot honour is refused where the config is checked
/// (OCIConfigCheck.swift). The file comes from whoever created the container: read bounded.
struct OCISpec: Decodable {
    var ociVersion: String?
    var process: Process?
    var root: Root?
    var hostname: String?
    var mounts: [Mount]?
    var annotations: [String: String]?
    var linux: Linux?
    var hooks: Hooks?

    /// runtime-spec "POSIX-platform Hooks" (OCIHooks runs them).
    struct Hooks: Codable {
        var prestart: [Hook]?
        var createRuntime: [Hook]?
        var createContainer: [Hook]?
        var startContainer: [Hook]?
        var poststart: [Hook]?
        var poststop: [Hook]?
    }

    struct Hook: Codable {
        var path: String
        var args: [String]?
        var env: [String]?
        var timeout: Int?
    }

    struct Process: Decodable {
        var terminal: Bool?
        var user: User?
        var args: [String]?
        var env: [String]?
        var cwd: String?
        var capabilities: Capabilities?
        var noNewPrivileges: Bool?
        var oomScoreAdj: Int?
        var rlimits: [Rlimit]?
    }

    struct User: Decodable {
        var uid: UInt32?
        var gid: UInt32?
        var additionalGids: [UInt32]?
    }

    struct Rlimit: Decodable {
        var type: String
        var soft: UInt64
        var hard: UInt64
    }

    /// A member whose value is not read, only whether it is there.
    struct Present: Decodable {
        init(from decoder: any Decoder) throws {}
    }

    struct Capabilities: Decodable {
        var bounding: [String]?
        var effective: [String]?
        var inheritable: [String]?
        var permitted: [String]?
        var ambient: [String]?

        var all: Set<String> {
            Set(
                (bounding ?? []) + (effective ?? []) + (inheritable ?? []) + (permitted ?? [])
                    + (ambient ?? []))
        }
    }

    struct Root: Decodable {
        var path: String?
        var readonly: Bool?
    }

    struct Mount: Decodable {
        var destination: String
        var type: String?
        var source: String?
        var options: [String]?

        var isBind: Bool {
            type == "bind" || (options ?? []).contains { $0 == "bind" || $0 == "rbind" }
        }
        var isReadOnly: Bool { (options ?? []).contains("ro") }
    }

    struct Linux: Decodable {
        var namespaces: [Namespace]?
        var resources: Resources?
        var cgroupsPath: String?
        var devices: [Device]?
        var sysctl: [String: String]?
        var uidMappings: [IDMapping]?
        var gidMappings: [IDMapping]?
        var maskedPaths: [String]?
        var readonlyPaths: [String]?
        var seccomp: Present?
    }

    struct Namespace: Decodable {
        var type: String
        var path: String?
    }

    struct Device: Decodable {
        var path: String
        /// c, b, u (unbuffered char) or p (fifo); the numbers of c and b.
        var type: String?
        var major: Int64?
        var minor: Int64?
        var fileMode: UInt32?
        var uid: UInt32?
        var gid: UInt32?
    }

    struct IDMapping: Decodable {
        var containerID: UInt32?
        var hostID: UInt32?
        var size: UInt32?
    }

    struct Resources: Decodable {
        var memory: Memory?
        var pids: Pids?
        var cpu: CPU?
    }

    struct Memory: Decodable {
        var limit: Int64?
    }

    struct Pids: Decodable {
        var limit: Int64?
    }

    struct CPU: Decodable {
        var shares: UInt64?
        var quota: Int64?
        var period: UInt64?
        var cpus: String?
        var mems: String?
    }

    /// The largest config.json (or process.json) read: runc's are a few KiB.
    static let maxBytes = 4 << 20

    /// Reads and decodes `path`, bounded; errors name the file.
    static func read<T: Decodable>(_ type: T.Type, at path: String) throws -> T {
        let data = try OCIFiles.read(path, limit: maxBytes, what: "the OCI config")
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch let error as DecodingError {
            throw AppdError(.invalidConfig, "\(path) is not a valid OCI config: \(error.brief)")
        }
    }

    /// The namespace entry of `type` (`network`, `pid`, ...), if listed.
    func namespace(_ type: String) -> Namespace? {
        linux?.namespaces?.first { $0.type == type }
    }
}

extension DecodingError {
    /// One line: the field's path and what was wrong with it.
    var brief: String {
        func path(_ context: Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return keys.isEmpty ? "the top level" : keys.joined(separator: ".")
        }
        switch self {
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "\(path(context)): \(context.debugDescription)"
        case .keyNotFound(let key, let context):
            return "\(path(context)): missing \(key.stringValue)"
        case .dataCorrupted(let context):
            return "\(path(context)): \(context.debugDescription)"
        @unknown default:
            return "\(self)"
        }
    }
}
