import AppBundle
import AppdBase
import ArgumentParser
import BundleArchive
import Foundation
import Glibc

/// What `appd install` was given: a bundle folder, an .ipa (zip with `Payload/Name.app`), a tar
/// of a bundle's contents (gzip'd or not), or `-` for any of these archives on stdin. Archives are told apart by their
/// first bytes, never by their names. Each becomes the same tar stream (docs/bundle-archive.md):
/// the daemon, or `--no-daemon`'s in-process extractor, reads nothing else.
struct InstallSource {
    /// `Name.app`: what the daemon calls the folder.
    let name: String
    /// How messages show it: the path as typed, `stdin`, or `Notes.ipa:Payload/Notes.app`.
    let shown: String
    /// Files and bytes to send, when known beforehand (for the progress line).
    var totals: (files: Int, bytes: Int64)?
    /// A spooled stdin .ipa to remove, or an fd to close, when done.
    private var cleanup: [() -> Void] = []

    enum Kind {
        case folder(String)
        case ipa(IPAArchive)
        /// A tar stream: the bytes already read to recognize it, then the rest of `fd`.
        case tar(fd: Int32, head: [UInt8], size: Int64?)
        /// A gzip'd tar: the first inflated bytes (read to recognize the tar), then the rest.
        case gzippedTar(GzipReader, head: [UInt8])
    }

    let kind: Kind

    init(
        kind: Kind, name: String, shown: String, totals: (files: Int, bytes: Int64)?,
        cleanup: [() -> Void]
    ) {
        self.kind = kind
        self.name = name
        self.shown = shown
        self.totals = totals
        self.cleanup = cleanup
    }

    func close() { for step in cleanup { step() } }

    static let zipMagic: [UInt8] = [0x50, 0x4B, 0x03, 0x04]

    /// A tar header has `ustar` at byte 257 (POSIX `ustar\0`, GNU `ustar  `).
    static func isTar(_ head: [UInt8]) -> Bool {
        head.count >= 262 && Array(head[257..<262]) == Array("ustar".utf8)
    }

    /// `argument` as typed; `name` is `--name`, for a tar (whose entries are the folder's
    /// contents and so do not say what it is called).
    static func open(_ argument: String, name: String?, limits: BundleLimits, countFolder: Bool)
        throws
        -> InstallSource
    {
        if argument == "-" { return try stdin(name: name, limits: limits) }
        var info = stat()
        guard stat(argument, &info) == 0 else {
            if errno == ENOENT {
                throw AppdError(.notFound, "\(argument): no such bundle folder or archive")
            }
            throw AppdError.system("stat \(argument)")
        }
        if info.st_mode & S_IFMT == S_IFDIR {
            if let name {
                throw ValidationError(
                    "--name \(name) is for a tar archive; \(argument) is a folder, named by itself")
            }
            let folder = URL(fileURLWithPath: argument).standardizedFileURL.lastPathComponent
            return InstallSource(
                kind: .folder(argument), name: folder, shown: argument,
                totals: countFolder ? count(argument) : nil, cleanup: [])
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw AppdError(
                .invalidBundle,
                "\(argument) is neither a folder nor a file; install a Name.app folder, a Name.ipa or a tar of a bundle"
            )
        }
        let fd = Glibc.open(argument, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw AppdError(
                .permissionDenied, "cannot read \(argument): \(errnoName(errno))",
                hint: "the archive is read with your permissions")
        }
        let head = try readHead(fd, what: argument)
        if head.starts(with: zipMagic) {
            Glibc.close(fd)
            return try ipa(at: argument, shown: argument, name: name, limits: limits, cleanup: [])
        }
        let base = (argument as NSString).lastPathComponent
        if head.starts(with: GzipReader.magic) {
            var guessed = base
            for suffix in [".tgz", ".gz"] where guessed.hasSuffix(suffix) {
                guessed.removeLast(suffix.count)
            }
            if guessed.hasSuffix(".tar") { guessed.removeLast(4) }
            let folder: String
            let gzipped: (reader: GzipReader, head: [UInt8])
            do {
                folder = try tarName(
                    name ?? (guessed.hasSuffix(".app") ? guessed : guessed + ".app"), for: argument)
                gzipped = try gzippedTar(fd: fd, head: head, shown: argument)
            } catch {
                Glibc.close(fd)
                throw error
            }
            return InstallSource(
                kind: .gzippedTar(gzipped.reader, head: gzipped.head), name: folder,
                shown: "\(argument):\(folder)",
                totals: nil, cleanup: [{ Glibc.close(fd) }])
        }
        guard isTar(head) else {
            Glibc.close(fd)
            throw AppdError(
                .invalidBundle,
                "\(argument) is not a bundle: neither a folder, nor a zip (.ipa), nor a tar archive (gzip'd or not)",
                hint:
                    "install a Name.app folder, a Name.ipa (Payload/Name.app inside), or tar -C Name.app -cf Name.tar ."
            )
        }
        let guessed = base.hasSuffix(".tar") ? String(base.dropLast(4)) : base
        let folder = try tarName(
            name ?? (guessed.hasSuffix(".app") ? guessed : guessed + ".app"), for: argument)
        return InstallSource(
            kind: .tar(fd: fd, head: head, size: Int64(info.st_size)), name: folder,
            shown: "\(argument):\(folder)",
            totals: nil, cleanup: [{ Glibc.close(fd) }])
    }

    /// stdin holds an .ipa or a tar. A zip is read from its end (the central directory), so it
    /// is spooled to an unlinked-on-exit file first, bounded by MaxTotalBytes; a tar streams.
    private static func stdin(name: String?, limits: BundleLimits) throws -> InstallSource {
        let head = try readHead(STDIN_FILENO, what: "stdin")
        if head.starts(with: zipMagic) {
            let directory =
                ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 }
                ?? "/tmp"
            var template = Array("\(directory)/appd-install-XXXXXX.ipa".utf8CString)
            let fd = template.withUnsafeMutableBufferPointer { mkstemps($0.baseAddress!, 4) }
            guard fd >= 0 else { throw AppdError.system("create a temporary file in \(directory)") }
            let path = String(
                decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let remove = { _ = unlink(path) }
            do {
                defer { Glibc.close(fd) }
                if case .failure(let error) = head.withUnsafeBytes({ writeAll(fd, $0) }) {
                    throw AppdError.system("write \(path)", errno: error.rawValue)
                }
                try copy(
                    from: STDIN_FILENO, to: fd, limit: limits.maxTotalBytes + (64 << 20), what: path
                )
                return try ipa(
                    at: path, shown: "stdin", name: name, limits: limits, cleanup: [remove])
            } catch {
                remove()
                throw error
            }
        }
        var gzipped: (reader: GzipReader, head: [UInt8])?
        if head.starts(with: GzipReader.magic) {
            gzipped = try gzippedTar(fd: STDIN_FILENO, head: head, shown: "stdin")
        }
        guard gzipped != nil || isTar(head) else {
            throw AppdError(
                .invalidBundle, "stdin is neither a zip (.ipa) nor a tar archive (gzip'd or not)",
                hint:
                    "appd install - reads an .ipa or a tar of a bundle's contents (tar -C Name.app -cf - .)"
            )
        }
        guard let name else {
            throw ValidationError(
                "a tar on stdin does not say what the bundle is called; pass --name Name.app")
        }
        let folder = try tarName(name, for: "stdin")
        return InstallSource(
            kind: gzipped.map { .gzippedTar($0.reader, head: $0.head) }
                ?? .tar(fd: STDIN_FILENO, head: head, size: nil),
            name: folder,
            shown: "stdin:\(folder)",
            totals: nil, cleanup: [])
    }

    private static func ipa(
        at path: String, shown: String, name: String?, limits: BundleLimits, cleanup: [() -> Void]
    )
        throws -> InstallSource
    {
        if let name {
            throw ValidationError(
                "--name \(name) is for a tar archive; an .ipa names its app (Payload/Name.app)")
        }
        let archive = try IPAArchive.open(at: path, shownAs: shown, limits: limits)
        return InstallSource(
            kind: .ipa(archive), name: archive.appName,
            shown: "\(shown):Payload/\(archive.appName)",
            totals: (archive.fileCount, archive.totalBytes), cleanup: cleanup)
    }

    /// A gzip stream whose inflated start is a tar header: the reader, and that start.
    private static func gzippedTar(fd: Int32, head: [UInt8], shown: String) throws -> (
        reader: GzipReader, head: [UInt8]
    ) {
        let reader = try GzipReader(fd: fd, head: head, shown: shown)
        var inner = [UInt8](repeating: 0, count: 512)
        var filled = 0
        while filled < inner.count {
            let count = try inner.withUnsafeMutableBytes { bytes in
                try reader.read(into: UnsafeMutableRawBufferPointer(rebasing: bytes[filled...]))
            }
            if count == 0 { break }
            filled += count
        }
        let tarHead = Array(inner[..<filled])
        guard isTar(tarHead) else {
            throw AppdError(
                .invalidBundle, "\(shown) is gzip'd, but what it holds is not a tar archive",
                hint:
                    "install a gzip'd tar of a bundle's contents: tar -C Name.app -czf Name.tar.gz ."
            )
        }
        return (reader, tarHead)
    }

    private static func tarName(_ name: String, for what: String) throws -> String {
        guard name.hasSuffix(".app"), name.count > 4, !name.contains("/"), !name.hasPrefix("."),
            name.utf8.count <= 255
        else {
            throw ValidationError(
                "'\(name)' (for \(what)) is not a bundle folder name like Hello.app; pass --name Name.app"
            )
        }
        return name
    }

    /// The archive as a tar stream, to `sink`.
    func write(onFile: ((Int64) -> Void)?, to sink: (UnsafeRawBufferPointer) throws -> Void) throws
    {
        switch kind {
        case .folder(let path):
            // Read with the caller's permissions, never following a symlink.
            try BundleArchiveWriter.write(bundleAt: path, onFile: onFile, to: sink)
        case .ipa(let archive):
            try archive.write(onFile: onFile, to: sink)
        case .gzippedTar(let reader, let head):
            try head.withUnsafeBytes { try sink($0) }
            var buffer = [UInt8](repeating: 0, count: BundleArchiveWriter.chunkSize)
            while true {
                let n = try buffer.withUnsafeMutableBytes { try reader.read(into: $0) }
                if n == 0 { return }
                try buffer.withUnsafeBytes { try sink(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
            }
        case .tar(let fd, let head, _):
            try head.withUnsafeBytes { try sink($0) }
            var buffer = [UInt8](repeating: 0, count: BundleArchiveWriter.chunkSize)
            while true {
                let n = buffer.withUnsafeMutableBytes { buffer in
                    retryingInterrupts { Glibc.read(fd, buffer.baseAddress, buffer.count) }
                }
                if n == 0 { return }
                if n < 0 { throw AppdError.system("read \(shown)") }
                try buffer.withUnsafeBytes { try sink(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
            }
        }
    }

    /// Files and bytes of a folder, for the progress line: a walk that opens nothing (the
    /// daemon does the checking). Nil if it cannot be walked; the send says why.
    private static func count(_ path: String) -> (files: Int, bytes: Int64)? {
        struct Counter: BundleVisitor {
            func wantsDescriptor(for entry: BundleEntry) -> Bool { false }
            func enterDirectory(_ entry: BundleEntry, fd: Int32) {}
            func leaveDirectory(_ entry: BundleEntry, fd: Int32) {}
            func visitFile(_ entry: BundleEntry, fd: Int32) {}
            func visitSymlink(_ entry: BundleEntry) {}
        }
        var counter = Counter()
        guard let tree = try? BundleWalker.walk(path, limits: BundleLimits(), visitor: &counter)
        else { return nil }
        return (tree.fileCount, tree.totalBytes)
    }

    /// Up to 512 bytes: enough for a zip's signature and a tar header's magic.
    private static func readHead(_ fd: Int32, what: String) throws -> [UInt8] {
        var head = [UInt8](repeating: 0, count: 512)
        var filled = 0
        while filled < head.count {
            let n = head.withUnsafeMutableBytes { head in
                retryingInterrupts { Glibc.read(fd, head.baseAddress! + filled, 512 - filled) }
            }
            if n == 0 { break }
            if n < 0 { throw AppdError.system("read \(what)") }
            filled += n
        }
        return Array(head[..<filled])
    }

    private static func copy(from input: Int32, to output: Int32, limit: Int64, what: String) throws
    {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var total: Int64 = 0
        while true {
            let n = buffer.withUnsafeMutableBytes { buffer in
                retryingInterrupts { Glibc.read(input, buffer.baseAddress, buffer.count) }
            }
            if n == 0 { return }
            if n < 0 { throw AppdError.system("read stdin") }
            total += Int64(n)
            guard total <= limit else {
                throw AppdError(
                    .invalidBundle, "the .ipa on stdin is over \(limit) bytes; refusing it")
            }
            if case .failure(let error) = buffer[..<n].withUnsafeBytes({ writeAll(output, $0) }) {
                throw AppdError.system("write \(what)", errno: error.rawValue)
            }
        }
    }
}
