import AppdBase
import Foundation
import PrintableText

/// `_CodeSignature/CodeResources`: the manifest as an XML property list shaped like Apple's
/// (docs/code-signing.md). Only `files2` is written and read:
///
///     <key>files2</key>
///     <dict>
///         <key>Hello</key>        <dict><key>hash2</key><data>SHA-256</data></dict>
///         <key>Current</key>      <dict><key>symlink</key><string>Versions/A</string></dict>
///         <key>Empty</key>        <dict><key>directory</key><true/></dict>
///     </dict>
///
/// appd writes it itself, byte for byte the same for the same tree (sorted by the bytes of the
/// paths, fixed indentation), so what is signed does not depend on a Foundation version.
public enum CodeResources {
    /// Largest CodeResources appd reads: ~150 bytes an entry, so room for 100,000 entries.
    public static let maxBytes = 32 << 20

    public static func encode(_ manifest: BundleManifest) -> Data {
        var text = "\t<key>files2</key>\n\t<dict>\n"
        for path in manifest.sortedPaths {
            text += "\t\t<key>\(escape(path))</key>\n\t\t<dict>\n"
            switch manifest.entries[path]! {
            case .file(let sha256):
                text +=
                    "\t\t\t<key>hash2</key>\n\t\t\t<data>\(Data(sha256).base64EncodedString())</data>\n"
            case .symlink(let target):
                text += "\t\t\t<key>symlink</key>\n\t\t\t<string>\(escape(target))</string>\n"
            case .emptyDirectory:
                text += "\t\t\t<key>directory</key>\n\t\t\t<true/>\n"
            }
            text += "\t\t</dict>\n"
        }
        return plistDocument(text + "\t</dict>\n")
    }

    /// An XML plist whose top-level dictionary holds `body` (lines already indented).
    static func plistDocument(_ body: String) -> Data {
        let text = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0">
            <dict>

            """
        return Data((text + body + "</dict>\n</plist>\n").utf8)
    }

    /// Parses CodeResources; every problem names `file` (its path in the bundle).
    public static func decode(_ data: Data, file: String) throws -> BundleManifest {
        func bad(_ message: String) -> AppdError {
            AppdError(
                .invalidBundle, "\(file) is malformed", problems: [BundleProblem(file, message)])
        }
        guard !data.starts(with: Array("bplist".utf8)) else {
            throw bad("is a binary property list; appd writes and reads CodeResources as XML")
        }
        let dict: [String: PlistValue]
        do { dict = try PropertyListReader.dictionary(from: data, maxBytes: maxBytes) } catch {
            throw bad(error.message)
        }
        guard case .dictionary(let files)? = dict["files2"] else {
            throw bad("has no files2 dictionary")
        }
        if let other = dict.keys.sorted().first(where: { $0 != "files2" }) {
            throw bad(
                "holds the key '\(other)'; appd reads files2 only, so it refuses what it would not check"
            )
        }
        var manifest = BundleManifest()
        for (path, value) in files {
            if let why = badPath(path) { throw bad("files2 entry '\(Printable(path))' \(why)") }
            guard case .dictionary(let item) = value, item.count == 1, let (key, field) = item.first
            else {
                throw bad(
                    "files2 entry '\(path)' must be a dictionary with one of hash2, symlink or directory"
                )
            }
            switch (key, field) {
            case ("hash2", .data(let digest)) where digest.count == 32:
                manifest.entries[path] = .file(sha256: Array(digest))
            case ("symlink", .string(let target)) where !target.isEmpty:
                manifest.entries[path] = .symlink(target: target)
            case ("directory", .bool(true)):
                manifest.entries[path] = .emptyDirectory
            default:
                throw bad(
                    "files2 entry '\(path)': \(key) must be a 32-byte SHA-256 (hash2), a target (symlink) or true (directory)"
                )
            }
        }
        return manifest
    }

    /// Why `path` cannot be a relative path inside a bundle, or nil.
    static func badPath(_ path: String) -> String? {
        if path.isEmpty || path.hasPrefix("/") || path.hasSuffix("/") {
            return "is not a relative path"
        }
        if path.split(separator: "/", omittingEmptySubsequences: false).contains(where: {
            $0.isEmpty || $0 == "." || $0 == ".."
        }) {
            return "has an empty, '.' or '..' component"
        }
        if let control = Printable.firstControl(in: path) {
            return "contains control characters (\(Printable.codePoint(control)))"
        }
        return nil
    }

    private static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(
            of: "<", with: "&lt;"
        )
        .replacingOccurrences(of: ">", with: "&gt;")
    }
}
