import AppdBase
import Crypto
import Foundation

/// What a code signature covers: every entry of a bundle but the signature itself, each regular
/// file by the SHA-256 of its bytes, each symlink by its target, and each empty directory (a
/// non-empty one is implied by what it holds). This is `files2` of `CodeResources`.
///
/// Keys are relative paths. Swift compares strings by canonical equivalence, so two names that
/// differ only by Unicode normalization are one key here: `ManifestBuilder` refuses such pairs
/// (and names differing only by case) before they could meet in a dictionary, and `diff` checks
/// the bytes of the names it matches.
public struct BundleManifest: Sendable, Equatable {
    public enum Entry: Sendable, Equatable {
        case file(sha256: [UInt8])
        case symlink(target: String)
        case emptyDirectory
    }

    public var entries: [String: Entry]

    public init(entries: [String: Entry] = [:]) { self.entries = entries }

    /// Paths sorted by their UTF-8 bytes, the order CodeResources is written in.
    public var sortedPaths: [String] {
        entries.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// What changed from `signed` (what CodeResources says) to `self` (what is on disk): every
    /// path added, removed or changed, each a problem naming its file.
    public func diff(against signed: BundleManifest) -> [BundleProblem] {
        var problems: [BundleProblem] = []
        for path in sortedPaths {
            guard let index = signed.entries.index(forKey: path) else {
                problems.append(
                    BundleProblem(path, "was added after signing (CodeResources does not list it)"))
                continue
            }
            let (signedPath, signedEntry) = signed.entries[index]
            if !signedPath.utf8.elementsEqual(path.utf8) {
                problems.append(
                    BundleProblem(
                        path,
                        "was renamed after signing: its name differs from '\(signedPath)' in CodeResources by Unicode normalization"
                    ))
                continue
            }
            switch (signedEntry, entries[path]!) {
            case (let a, let b) where a == b: continue
            case (.file, .file):
                problems.append(
                    BundleProblem(
                        path, "was changed after signing (its SHA-256 differs from CodeResources)"))
            case (.symlink(let was), .symlink(let now)):
                problems.append(
                    BundleProblem(
                        path,
                        "is a symlink retargeted after signing: it points to '\(now)', CodeResources says '\(was)'"
                    ))
            case (let was, let now):
                problems.append(
                    BundleProblem(
                        path, "was \(was.kindName) when signed and is now \(now.kindName)"))
            }
        }
        for path in signed.sortedPaths where entries[path] == nil {
            problems.append(
                BundleProblem(path, "was removed after signing (CodeResources lists it)"))
        }
        return problems
    }

    /// SHA-256 over a canonical text of the manifest (one line per entry, sorted by bytes): the
    /// registry keeps it so that a launch can tell whether the installed tree changed.
    public var digest: [UInt8] {
        var hasher = SHA256()
        for path in sortedPaths {
            var line = Array(path.utf8) + [0]
            switch entries[path]! {
            case .file(let sha256): line += Array("f\0".utf8) + sha256
            case .symlink(let target): line += Array("l\0".utf8) + Array(target.utf8)
            case .emptyDirectory: line += Array("d".utf8)
            }
            hasher.update(data: line + [0x0A])
        }
        return Array(hasher.finalize())
    }
}

extension BundleManifest.Entry {
    var kindName: String {
        switch self {
        case .file: "a regular file"
        case .symlink: "a symlink"
        case .emptyDirectory: "an empty directory"
        }
    }
}

/// Builds the manifest of a tree from what a walk sees, and refuses names that would collide on
/// a case-insensitive or normalizing filesystem (`Ab` and `ab`, `é` as one code point and as
/// `e` + U+0301): a signature must name exactly one file, whatever the filesystem.
///
/// The signature's own files (`_CodeSignature/CodeResources` and `Signature`) are left out.
public struct ManifestBuilder: Sendable {
    public let layout: BundleLayout
    private var manifest = BundleManifest()
    private var directories: [String] = []
    /// Parents of everything seen, to tell the empty directories at the end.
    private var parents: Set<String> = []
    /// Lower-cased path → the path as seen; canonical equivalence makes this catch
    /// normalization clashes too.
    private var folded: [String: String] = [:]
    public private(set) var problems: [BundleProblem] = []

    public init(layout: BundleLayout) { self.layout = layout }

    public mutating func directory(_ entry: BundleEntry) {
        guard !entry.relativePath.isEmpty else { return }
        note(entry.relativePath)
        if entry.relativePath != layout.signatureDirectory {
            directories.append(entry.relativePath)
        }
    }

    public mutating func file(_ entry: BundleEntry, sha256: [UInt8]) {
        note(entry.relativePath)
        guard !layout.isSignatureFile(entry.relativePath) else { return }
        insert(entry.relativePath, .file(sha256: sha256))
    }

    public mutating func symlink(_ entry: BundleEntry) {
        guard case .symlink(let target) = entry.kind else { return }
        note(entry.relativePath)
        insert(entry.relativePath, .symlink(target: target))
    }

    public func finish() -> (manifest: BundleManifest, problems: [BundleProblem]) {
        var manifest = manifest
        for directory in directories where !parents.contains(directory) {
            manifest.entries[directory] = .emptyDirectory
        }
        return (manifest, problems)
    }

    private mutating func note(_ path: String) {
        if let other = folded.updateValue(path, forKey: path.lowercased()) {
            let why =
                other.lowercased().utf8.elementsEqual(path.lowercased().utf8)
                ? "differ only by case" : "differ only by Unicode normalization"
            problems.append(
                BundleProblem(
                    path,
                    "and '\(other)' \(why); on many filesystems they are one file, so a signature could not say which one it covers"
                ))
        }
        if let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) {
            parents.insert(String(path[..<slash]))
        } else {
            parents.insert("")
        }
    }

    private mutating func insert(_ path: String, _ entry: BundleManifest.Entry) {
        manifest.entries[path] = entry
    }
}

/// SHA-256 for callers that must not import Crypto (the installer hashes while it copies).
public struct ContentHasher {
    private var hasher = SHA256()

    public init() {}

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        hasher.update(bufferPointer: bytes)
    }

    public func finish() -> [UInt8] { Array(hasher.finalize()) }

    /// Reads `fd` to its end and hashes what it read; `buffer` is reused across calls.
    public static func sha256(of fd: Int32, what: String, buffer: inout [UInt8]) throws -> [UInt8] {
        var hasher = ContentHasher()
        while true {
            let n = buffer.withUnsafeMutableBytes { buffer in
                retryingInterrupts { Glibc.read(fd, buffer.baseAddress, buffer.count) }
            }
            if n == 0 { return hasher.finish() }
            if n < 0 { throw AppdError.system("read \(what)") }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
        }
    }

    /// Lower-case hex, two digits a byte.
    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 15)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

extension BundleLayout {
    /// `_CodeSignature` (flat bundles) or `Contents/_CodeSignature` (macOS layout).
    public var signatureDirectory: String {
        self == .ios ? "_CodeSignature" : "Contents/_CodeSignature"
    }
    public var codeResourcesPath: String { "\(signatureDirectory)/CodeResources" }
    public var signaturePath: String { "\(signatureDirectory)/Signature" }

    func isSignatureFile(_ path: String) -> Bool {
        path == codeResourcesPath || path == signaturePath
    }
}

/// A visitor that reads every file once and builds the manifest: what `verify` and `sign` use
/// (the installer builds it while copying instead).
struct ManifestHasher: BundleVisitor {
    var builder: ManifestBuilder
    /// Only the bytes a read wrote are used: no need to zero 256 KiB per verification.
    private var buffer = [UInt8](unsafeUninitializedCapacity: 1 << 18) { _, count in
        count = 1 << 18
    }

    init(layout: BundleLayout) { builder = ManifestBuilder(layout: layout) }

    mutating func enterDirectory(_ entry: BundleEntry, fd: Int32) throws {
        builder.directory(entry)
    }
    mutating func leaveDirectory(_ entry: BundleEntry, fd: Int32) throws {}
    mutating func visitSymlink(_ entry: BundleEntry) throws { builder.symlink(entry) }

    mutating func visitFile(_ entry: BundleEntry, fd: Int32) throws {
        builder.file(
            entry,
            sha256: try ContentHasher.sha256(of: fd, what: entry.relativePath, buffer: &buffer))
    }
}

extension BundleManifest {
    /// Walks and hashes the bundle at `path`: the manifest as the disk has it now, and the
    /// problems of the walk and of the names.
    public static func read(bundleAt path: String, layout: BundleLayout, limits: BundleLimits)
        throws -> (manifest: BundleManifest, problems: [BundleProblem])
    {
        var hasher = ManifestHasher(layout: layout)
        let tree = try BundleWalker.walk(path, limits: limits, visitor: &hasher)
        let (manifest, problems) = hasher.builder.finish()
        return (manifest, tree.problems + problems)
    }
}
