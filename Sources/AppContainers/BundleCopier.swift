import AppBundle
import AppdBase
import Glibc

/// Copies a bundle into staging as the walker hands it over: the walker has opened each source
/// file without following links and checked it, and the copier reads exactly that fd, so what
/// lands in staging is what was checked, whatever the source does meanwhile.
///
/// It hashes each file with SHA-256 as the bytes pass through (`manifest`), so an install reads
/// the bundle once: the signature check compares these hashes, of exactly the bytes written to
/// staging, with CodeResources.
///
/// Destination modes are the installed ones from the start: files 0444 (0555 if any execute
/// bit was set), directories 0555 once filled. Owner is root, the installer's own uid.
struct BundleCopier: BundleVisitor {
    /// Destination directories, innermost last; the first is the staged `Name.app`.
    private var stack: [FileDescriptor]
    private let maxTotalBytes: Int64
    private(set) var bytesCopied: Int64 = 0
    private(set) var filesCopied = 0
    var progress: ((_ files: Int, _ bytes: Int64) -> Void)?
    /// The tree as copied: every file's SHA-256, symlinks, empty directories, name clashes.
    private(set) var manifest: ManifestBuilder
    private var buffer = [UInt8](repeating: 0, count: 1 << 18)

    init(into root: FileDescriptor, limits: BundleLimits, layout: BundleLayout) {
        stack = [root]
        maxTotalBytes = limits.maxTotalBytes
        manifest = ManifestBuilder(layout: layout)
    }

    private static func name(_ entry: BundleEntry) -> String {
        String(entry.relativePath.split(separator: "/").last ?? "")
    }

    private var current: FileDescriptor { stack[stack.count - 1] }

    mutating func enterDirectory(_ entry: BundleEntry, fd: Int32) throws {
        if entry.relativePath.isEmpty { return }  // the root: already created
        manifest.directory(entry)
        stack.append(try current.makeDirectory(Self.name(entry), mode: 0o700))
    }

    mutating func leaveDirectory(_ entry: BundleEntry, fd: Int32) throws {
        if entry.relativePath.isEmpty { return }  // sealed by the installer once all is done
        try stack.removeLast().chmod(0o555)
    }

    mutating func visitFile(_ entry: BundleEntry, fd source: Int32) throws {
        let name = Self.name(entry)
        let out = openat(
            current.raw, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard out >= 0 else { throw AppdError.system("create \(current.child(name))") }
        defer { close(out) }
        manifest.file(entry, sha256: try copy(from: source, to: out, what: entry.relativePath))
        guard fchmod(out, entry.isExecutable ? 0o555 : 0o444) == 0 else {
            throw AppdError.system("chmod \(current.child(name))")
        }
        filesCopied += 1
        progress?(filesCopied, bytesCopied)
    }

    mutating func visitSymlink(_ entry: BundleEntry) throws {
        guard case .symlink(let target) = entry.kind else { return }
        let name = Self.name(entry)
        guard symlinkat(target, current.raw, name) == 0 else {
            throw AppdError.system("symlink \(current.child(name))")
        }
        manifest.symlink(entry)
    }

    /// Reads into user space, hashes, writes: copy_file_range would keep the bytes in the
    /// kernel, but then they would have to be read a second time to be hashed. Returns the
    /// SHA-256 of what was written.
    private mutating func copy(from source: Int32, to out: Int32, what: String) throws -> [UInt8] {
        var hasher = ContentHasher()
        while true {
            let n = buffer.withUnsafeMutableBytes { buffer in
                retryingInterrupts { read(source, buffer.baseAddress, buffer.count) }
            }
            if n == 0 { return hasher.finish() }
            if n < 0 { throw AppdError.system("read \(what)") }
            try buffer.withUnsafeBytes { bytes in
                let chunk = UnsafeRawBufferPointer(rebasing: bytes[..<n])
                hasher.update(chunk)
                if case .failure(let error) = writeAll(out, chunk) {
                    throw AppdError.system("write \(what)", errno: error.rawValue)
                }
            }
            bytesCopied += Int64(n)
            // The walker checked sizes before the copy; a file growing under us is caught here.
            guard bytesCopied <= maxTotalBytes else {
                throw AppdError(
                    .invalidBundle,
                    "the bundle grew past the \(maxTotalBytes)-byte limit while it was being copied",
                    problems: [BundleProblem(what, "grew while being copied")])
            }
        }
    }
}
