import AppBundle
import CLinux
import Glibc

/// Copies a bundle into staging as the walker hands it over: the walker has opened each source
/// file without following links and checked it, and the copier reads exactly that fd, so what
/// lands in staging is what was checked, whatever the source does meanwhile.
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

    init(into root: FileDescriptor, limits: BundleLimits) {
        stack = [root]
        maxTotalBytes = limits.maxTotalBytes
    }

    private static func name(_ entry: BundleEntry) -> String {
        String(entry.relativePath.split(separator: "/").last ?? "")
    }

    private var current: FileDescriptor { stack[stack.count - 1] }

    mutating func enterDirectory(_ entry: BundleEntry, fd: Int32) throws {
        if entry.relativePath.isEmpty { return }  // the root: already created
        stack.append(try current.makeDirectory(Self.name(entry), mode: 0o700))
    }

    mutating func leaveDirectory(_ entry: BundleEntry, fd: Int32) throws {
        if entry.relativePath.isEmpty { return }  // sealed by the installer once all is done
        try stack.removeLast().chmod(0o555)
    }

    mutating func visitFile(_ entry: BundleEntry, fd source: Int32) throws {
        let name = Self.name(entry)
        let out = openat(current.raw, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard out >= 0 else { throw AppdError.system("create \(current.child(name))") }
        defer { close(out) }
        try copy(from: source, to: out, what: entry.relativePath)
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
    }

    /// copy_file_range keeps the bytes in the kernel; read/write is the fallback for
    /// filesystems that refuse it.
    private mutating func copy(from source: Int32, to out: Int32, what: String) throws {
        var useKernelCopy = true
        var buffer: [UInt8] = []
        while true {
            var n: Int
            if useKernelCopy {
                n = appd_copy_file_range(source, out, 1 << 30)
                if n < 0 && [EXDEV, EINVAL, ENOSYS, EOPNOTSUPP].contains(errno) {
                    useKernelCopy = false
                    buffer = [UInt8](repeating: 0, count: 1 << 18)
                    continue
                }
            } else {
                n = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
                if n > 0 {
                    var written = 0
                    while written < n {
                        let w = buffer.withUnsafeBytes { write(out, $0.baseAddress! + written, n - written) }
                        guard w > 0 else { throw AppdError.system("write \(what)") }
                        written += w
                    }
                }
            }
            if n == 0 { return }
            if n < 0 {
                if errno == EINTR { continue }
                throw AppdError.system("copy \(what)")
            }
            bytesCopied += Int64(n)
            // The walker checked sizes before the copy; a file growing under us is caught here.
            guard bytesCopied <= maxTotalBytes else {
                throw AppdError(.invalidBundle,
                    "the bundle grew past the \(maxTotalBytes)-byte limit while it was being copied",
                    problems: [BundleProblem(what, "grew while being copied")])
            }
        }
    }
}
