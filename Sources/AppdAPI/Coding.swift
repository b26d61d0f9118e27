#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// The JSON of the API: ISO 8601 dates, sorted keys (stable output for diffs and tests).
public enum APICoding {
    public static func encoder(pretty: Bool = false) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(date.formatted(Self.fractional))
        }
        return encoder
    }

    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            if let date = try? Self.fractional.parse(text) { return date }
            if let date = try? Date.ISO8601FormatStyle().parse(text) { return date }
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "'\(text)' is not an ISO 8601 date")
        }
        return decoder
    }

    /// Milliseconds: instances started in the same second still sort by start.
    static let fractional = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
}

/// Where the daemon listens, as client and server both work it out.
public enum APISocket {
    public static let defaultPath = "/run/appd/appd.sock"
    public static let defaultRuntimeDirectory = "/run/appd"
    public static let defaultStateRoot = "/var/lib/appd"

    /// The daemon's runtime directory (instance records, the socket): `/run/appd` for the
    /// system's state root, `<root>/run` for a private one, so a test daemon never meets the
    /// system's records.
    public static func runtimeDirectory(stateRoot: String) -> String {
        stateRoot == defaultStateRoot ? defaultRuntimeDirectory : "\(stateRoot)/run"
    }

    /// `--socket`, else `$APPD_SOCKET`, else the socket of `--root`/`$APPD_ROOT`'s daemon, else
    /// `/run/appd/appd.sock`.
    public static func resolve(explicit: String?, root: String?, environment: [String: String]) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let socket = environment["APPD_SOCKET"], !socket.isEmpty { return socket }
        let root = root ?? environment["APPD_ROOT"].flatMap { $0.isEmpty ? nil : $0 }
        if let root { return "\(runtimeDirectory(stateRoot: root))/appd.sock" }
        return defaultPath
    }
}
