import AppBundle
import AppdBase
import Glibc

/// The counterpart of `BundleCopier` for a bundle that is already where it will be installed
/// (extracted from an archive into the state root, then renamed into staging): it gives every
/// entry the installed mode (files 0444, or 0555 if any execute bit was set; directories 0555
/// once visited) and builds the manifest from the SHA-256 the extractor took of each file as
/// it wrote it, so no file is read a second time.
///
/// A file the extractor did not hash, or a hash with no file, is refused: the tree must be
/// exactly what was extracted.
struct BundleSealer: BundleVisitor {
    private let digests: [String: [UInt8]]
    private(set) var manifest: ManifestBuilder
    private(set) var filesSealed = 0
    private(set) var bytesSealed: Int64 = 0
    var progress: ((_ files: Int, _ bytes: Int64) -> Void)?

    init(digests: [String: [UInt8]], layout: BundleLayout) {
        self.digests = digests
        manifest = ManifestBuilder(layout: layout)
    }

    mutating func enterDirectory(_ entry: BundleEntry, fd: Int32) throws {
        manifest.directory(entry)
    }

    mutating func leaveDirectory(_ entry: BundleEntry, fd: Int32) throws {
        if entry.relativePath.isEmpty { return }  // sealed by the installer once all is done
        guard fchmod(fd, 0o555) == 0 else { throw AppdError.system("chmod \(entry.relativePath)") }
    }

    mutating func visitFile(_ entry: BundleEntry, fd: Int32) throws {
        guard let digest = digests[entry.relativePath] else {
            throw AppdError(
                .invalidBundle,
                "\(entry.relativePath) is in the staged bundle but was not extracted from the archive"
            )
        }
        guard fchmod(fd, entry.isExecutable ? 0o555 : 0o444) == 0 else {
            throw AppdError.system("chmod \(entry.relativePath)")
        }
        manifest.file(entry, sha256: digest)
        filesSealed += 1
        bytesSealed += entry.size
        progress?(filesSealed, bytesSealed)
    }

    mutating func visitSymlink(_ entry: BundleEntry) throws {
        manifest.symlink(entry)
    }

    /// Every file extracted was seen in the staged tree. More files than digests happens only
    /// when two names are one key (`é` precomposed and decomposed: Swift compares strings by
    /// canonical equivalence); the manifest refuses such a clash by name right after.
    func checkComplete() throws {
        guard filesSealed >= digests.count else {
            throw AppdError(
                .invalidBundle,
                "\(digests.count) files were extracted from the archive but \(filesSealed) are in the staged bundle",
                subject: .init(.bundle))
        }
    }
}
