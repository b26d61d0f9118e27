import AppBundle
import AppdBase
import Glibc

/// Writes a bundle folder as a tar stream (docs/bundle-archive.md), for `appd install` to send
/// to the daemon.
///
/// It runs in the client, as the caller: every file is read with the caller's permissions, so
/// nobody gets a file installed that they could not read. The walk goes through directory fds
/// and never follows a symlink (a link is archived as a link), and it streams: memory is one
/// 64 KiB buffer whatever the size of the bundle.
///
/// The output is deterministic: entries sorted by the bytes of their names, each directory
/// before its contents, paths relative to the bundle without `./`, owners 0, times 0, and the
/// permission bits as they are (setuid and setgid included, so that the daemon refuses such a
/// file as `appd verify` does, rather than installing it with the bits silently dropped).
public enum BundleArchiveWriter {
    /// How much is handed to the sink at a time (the last piece may be shorter).
    public static let chunkSize = 64 << 10

    /// `onFile` is called after each regular file with its size, for a progress display.
    /// `folder`, if given, puts the bundle under that name (`Name.app`: an image's layer, which
    /// holds the bundle at `/Name.app`), its own directory entry first with the bundle's mode.
    public static func write(
        bundleAt path: String, under folder: String? = nil, onFile: ((Int64) -> Void)? = nil,
        to sink: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if errno == ENOENT { throw AppdError(.notFound, "\(path): no such bundle directory") }
            throw AppdError.system("stat \(path)")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw AppdError(
                .invalidBundle,
                info.st_mode & S_IFMT == S_IFLNK
                    ? "\(path) is a symlink; name the bundle directory itself"
                    : "\(path) is not a directory; a bundle is a Name.app folder")
        }
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw readError(path) }
        defer { close(fd) }
        guard TarWalk.same(fd, as: info) else {
            throw AppdError(.conflict, "\(path) changed while being read")
        }
        try withoutActuallyEscaping(sink) { sink in
            let output = TarOutput(sink: sink)
            let prefix = folder.map { $0 + "/" } ?? ""
            if !prefix.isEmpty {
                try output.header(
                    prefix, mode: info.st_mode, size: 0, type: Tar.EntryType.directory)
            }
            try withoutActuallyEscaping(onFile ?? { _ in }) { onFile in
                try TarWalk(root: path, prefix: prefix, output: output, onFile: onFile)
                    .directory(fd, path: "")
            }
            // The end-of-archive marker.
            try output.append(zeros: 2 * Tar.blockSize)
            try output.flush()
        }
    }

    /// Writes the stream to `fd` (a socket or a file), in `chunkSize` pieces.
    public static func write(bundleAt path: String, toFileDescriptor fd: Int32) throws {
        try write(bundleAt: path) { bytes in
            guard let base = bytes.baseAddress else { return }
            var offset = 0
            while offset < bytes.count {
                // send with MSG_NOSIGNAL: a daemon hanging up must be an error, not a SIGPIPE
                // that kills the client. Plain write for what is not a socket.
                var sent = retryingInterrupts {
                    send(fd, base + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
                }
                if sent < 0 && errno == ENOTSOCK {
                    sent = retryingInterrupts {
                        Glibc.write(fd, base + offset, bytes.count - offset)
                    }
                }
                if sent < 0 { throw AppdError.system("write the bundle archive") }
                offset += sent
            }
        }
    }

    /// A file or directory the caller may not read is their problem to fix, so say so.
    static func readError(_ path: String, errno error: Int32 = errno) -> AppdError {
        guard error == EACCES else { return AppdError.system("open \(path)", errno: error) }
        return AppdError(
            .permissionDenied, "cannot read \(path): \(errnoName(error)) (Permission denied)",
            errno: error,
            hint: "the bundle is read with your permissions; make every file of it readable to you")
    }
}

/// One walk of a bundle, writing entries as it goes.
private struct TarWalk {
    let root: String
    /// Put before every entry's name (the bundle's folder in an image layer), or empty.
    let prefix: String
    let output: TarOutput
    let onFile: (Int64) -> Void

    /// For messages: the path as the caller named it.
    func shown(_ relative: String) -> String {
        root.hasSuffix("/") ? root + relative : root + "/" + relative
    }

    func directory(_ fd: Int32, path: String) throws {
        for name in try names(fd, path: path) {
            let entry = path.isEmpty ? name : path + "/" + name
            var info = stat()
            guard fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
                throw AppdError.system("stat \(shown(entry))")
            }
            switch info.st_mode & S_IFMT {
            case S_IFDIR:
                let child = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                guard child >= 0 else { throw BundleArchiveWriter.readError(shown(entry)) }
                defer { close(child) }
                guard Self.same(child, as: info) else { throw changed(entry) }
                try header(entry + "/", mode: info.st_mode, size: 0, type: Tar.EntryType.directory)
                try directory(child, path: entry)
            case S_IFREG:
                // O_NONBLOCK: should the name now be a FIFO, the open must not hang.
                let file = openat(fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
                guard file >= 0 else { throw BundleArchiveWriter.readError(shown(entry)) }
                defer { close(file) }
                var now = stat()
                guard fstat(file, &now) == 0, Self.same(file, as: info) else {
                    throw changed(entry)
                }
                // As verify and --no-daemon refuse it: a tar of the file's bytes would hide
                // that it has another name.
                if let problem = BundleWalker.linkProblem(now.st_nlink) {
                    throw AppdError(.invalidBundle, "\(shown(entry)): \(problem)")
                }
                // The size is the open file's: it is what the header promises and what is read.
                let size = Int64(now.st_size)
                try header(entry, mode: now.st_mode, size: size, type: Tar.EntryType.regular)
                guard try output.append(from: file, count: size, path: shown(entry)) else {
                    throw changed(entry)
                }
                try output.append(zeros: Tar.padding(for: size))
                onFile(size)
            case S_IFLNK:
                var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
                let count = readlinkat(fd, name, &buffer, buffer.count)
                guard count >= 0 else { throw AppdError.system("readlink \(shown(entry))") }
                try header(
                    entry, mode: 0o777, size: 0, type: Tar.EntryType.symlink, link: buffer[..<count]
                )
            default:
                let kind =
                    switch info.st_mode & S_IFMT {
                    case S_IFIFO: "a FIFO"
                    case S_IFSOCK: "a socket"
                    case S_IFCHR, S_IFBLK: "a device node"
                    default: "of an unknown file type"
                    }
                throw AppdError(
                    .invalidBundle,
                    "\(shown(entry)) is \(kind); a bundle holds only files, directories and symlinks"
                )
            }
        }
    }

    func header(
        _ path: String, mode: mode_t, size: Int64, type: UInt8, link: ArraySlice<UInt8> = []
    ) throws {
        try output.header(prefix + path, mode: mode, size: size, type: type, link: link)
    }

    /// Names sorted by their bytes, so the same folder always gives the same stream.
    func names(_ fd: Int32, path: String) throws -> [String] {
        let copy = dup(fd)
        guard copy >= 0, let dir = fdopendir(copy) else {
            if copy >= 0 { close(copy) }
            throw AppdError.system("read directory \(shown(path))")
        }
        defer { closedir(dir) }
        var names: [String] = []
        while true {
            errno = 0
            guard let item = readdir(dir) else {
                if errno != 0 { throw AppdError.system("read directory \(shown(path))") }
                break
            }
            let raw = directoryEntryName(item)
            if raw == [46] || raw == [46, 46] { continue }
            // The installer refuses such names too; better to say so before sending anything.
            guard let name = String(validating: raw, as: UTF8.self) else {
                throw AppdError(
                    .invalidBundle,
                    "\(shown(path.isEmpty ? "" : path + "/"))\(Tar.shown(raw)): the name is not valid UTF-8"
                )
            }
            names.append(name)
        }
        return names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    func changed(_ entry: String) -> AppdError {
        AppdError(.conflict, "\(shown(entry)) changed while being read; try again")
    }

    /// The fd names the inode that `fstatat` described (nobody swapped it in between).
    static func same(_ fd: Int32, as info: stat) -> Bool {
        var now = stat()
        return fstat(fd, &now) == 0 && now.st_dev == info.st_dev && now.st_ino == info.st_ino
            && now.st_mode & S_IFMT == info.st_mode & S_IFMT
    }
}

/// The writer's one buffer: headers and file data gather here and go to the sink a chunk at a
/// time, so memory stays at `BundleArchiveWriter.chunkSize` whatever the bundle holds.
final class TarOutput {
    private let sink: (UnsafeRawBufferPointer) throws -> Void
    private let base: UnsafeMutableRawPointer
    private let capacity = BundleArchiveWriter.chunkSize
    private var count = 0
    private var flushed: Int64 = 0

    /// Bytes of the stream so far, the buffered ones included.
    var written: Int64 { flushed + Int64(count) }

    init(sink: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        self.sink = sink
        base = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
    }

    deinit { base.deallocate() }

    func append(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            if count == capacity { try flush() }
            let step = min(capacity - count, bytes.count - offset)
            bytes.withUnsafeBytes {
                UnsafeMutableRawBufferPointer(start: base + count, count: step)
                    .copyMemory(
                        from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + step)]))
            }
            count += step
            offset += step
        }
    }

    func append(zeros total: Int) throws {
        var left = total
        while left > 0 {
            if count == capacity { try flush() }
            let step = min(capacity - count, left)
            (base + count).initializeMemory(as: UInt8.self, repeating: 0, count: step)
            count += step
            left -= step
        }
    }

    /// Reads exactly `size` bytes of `fd` into the stream; false if the file ended sooner (it
    /// shrank after its header was written, so the stream can no longer be right).
    func append(from fd: Int32, count size: Int64, path: String) throws -> Bool {
        var left = size
        while left > 0 {
            if count == capacity { try flush() }
            let wanted = Int(min(Int64(capacity - count), left))
            let got = retryingInterrupts { read(fd, base + count, wanted) }
            if got < 0 { throw AppdError.system("read \(path)") }
            if got == 0 { return false }
            count += got
            left -= Int64(got)
        }
        return true
    }

    /// A ustar header, after a pax record for whatever does not fit in it.
    /// `records`: pax records of the caller's own, before those for what does not fit.
    func header(
        _ path: String, mode: mode_t, size: Int64, type: UInt8, link: ArraySlice<UInt8> = [],
        records: [UInt8] = []
    ) throws {
        var pax = records
        if path.utf8.count > Tar.nameFieldBytes { pax += Pax.record("path", Array(path.utf8)) }
        if link.count > Tar.nameFieldBytes { pax += Pax.record("linkpath", link) }
        if size > Tar.maxOctalSize { pax += Pax.record("size", Array(String(size).utf8)) }
        if !pax.isEmpty {
            try append(
                TarHeader.encode(
                    name: "././@PaxHeader".utf8, mode: 0o644, size: Int64(pax.count),
                    type: Tar.EntryType.paxEntry))
            try append(pax)
            try append(zeros: Tar.padding(for: Int64(pax.count)))
        }
        try append(
            TarHeader.encode(
                name: path.utf8, mode: Int64(mode & 0o7777), size: size, type: type,
                linkName: link))
    }

    func append(_ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < bytes.count {
            if count == capacity { try flush() }
            let step = min(capacity - count, bytes.count - offset)
            UnsafeMutableRawBufferPointer(start: base + count, count: step)
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + step)]))
            count += step
            offset += step
        }
    }

    func flush() throws {
        guard count > 0 else { return }
        try sink(UnsafeRawBufferPointer(start: base, count: count))
        flushed += Int64(count)
        count = 0
    }
}
