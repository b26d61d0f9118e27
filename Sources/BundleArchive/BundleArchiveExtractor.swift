import AppBundle
import AppdBase
import Glibc

/// Extracts a bundle archive (docs/bundle-archive.md) that arrives in pieces, as a request body
/// does: the daemon feeds each chunk to `consume` as it comes and calls `finish` at the end.
///
/// The archive is hostile until proven otherwise. Nothing is written outside the directory
/// (see `ExtractionTree`), limits are enforced as each header arrives, so an oversized archive
/// is refused before its data is read, and memory stays bounded whatever the input: one header
/// block, one pax or long-name record of at most 64 KiB, and the open directories of one path.
/// File data goes from the caller's buffer straight to the file.
///
/// The first error is final: later calls throw again. The directory then holds whatever was
/// extracted so far; the caller removes it.
public struct BundleArchiveExtractor: ~Copyable {
    enum Phase {
        /// Collecting the next header block.
        case header
        /// Writing a file's data to `file`.
        case data(remaining: Int64)
        /// Collecting the map at the start of a sparse file's data (`sparse`), a block at a time.
        case sparseMap(remaining: Int64)
        /// Collecting a pax or GNU long-name record.
        case metadata(type: UInt8, remaining: Int)
        /// Padding to the block boundary, or a global pax header, which is ignored.
        case skip(remaining: Int64)
        /// Past the end-of-archive marker: only zero padding may follow.
        case ended
    }

    var tree: ExtractionTree
    var phase = Phase.header
    var block = [UInt8](repeating: 0, count: Tar.blockSize)
    var blockFill = 0
    var record: [UInt8] = []
    /// What pax and GNU long-name records said about the next entry.
    var pending = PendingMetadata()
    var sawZeroBlock = false
    var file: (fd: Int32, entry: String, size: Int64)?
    /// The file being written, as `digests` names it, and the SHA-256 of its bytes so far.
    var filePath = ""
    var hasher = ContentHasher()
    /// The sparse file being written (`file`), where its regions go.
    var sparse: SparseFile?
    /// The SHA-256 of every regular file extracted, by its path relative to the directory (no
    /// `./`): the installer checks these against CodeResources instead of reading the files a
    /// second time. Bounded by `MaxFiles`.
    var digests: [String: [UInt8]] = [:]
    var bytesWritten: Int64 = 0
    var lastEntry: String?
    /// Bytes consumed so far, for messages about where things went wrong.
    var position: Int64 = 0
    var failure: AppdError?

    /// `directory` must exist and be empty; the archive is extracted beneath it.
    public init(into directory: String, limits: BundleLimits, rules: ExtractionRules = .bundle)
        throws
    {
        tree = try ExtractionTree(root: directory, limits: limits, rules: rules)
    }

    deinit {
        if let file { close(file.fd) }
    }

    public mutating func consume(_ bytes: UnsafeRawBufferPointer) throws {
        if let failure { throw failure }
        do {
            try run(bytes[...])
        } catch let error as AppdError {
            failure = error
            closeFile()
            throw error
        }
    }

    /// Checks that the archive ended properly: with its end-of-archive marker (two zero blocks),
    /// optionally followed by zero padding. An archive cut anywhere else is refused, even
    /// between entries, since it would otherwise install as a smaller bundle.
    public mutating func finish() throws {
        if let failure { throw failure }
        let after = lastEntry.map { " after entry '\($0)'" } ?? ""
        let problem: AppdError? =
            switch phase {
            case .ended: nil
            case .header where blockFill > 0:
                .archive(
                    "the archive is truncated inside a header at byte \(position - Int64(blockFill))\(after)"
                )
            case .header:
                .archive(
                    "the archive ends at byte \(position)\(after) without its end-of-archive marker (two zero blocks); it is truncated"
                )
            case .data(let remaining), .sparseMap(let remaining):
                .archive(
                    file?.entry ?? "",
                    "is truncated: \(remaining) of its \(file?.size ?? 0) bytes are missing")
            case .metadata:
                .archive("the archive is truncated inside a pax or long-name record\(after)")
            case .skip: .archive("the archive is truncated inside padding\(after)")
            }
        if let problem {
            failure = problem
            closeFile()
            throw problem
        }
    }

    private mutating func run(_ input: Slice<UnsafeRawBufferPointer>) throws {
        var rest = input
        while !rest.isEmpty {
            switch phase {
            case .header:
                let count = min(Tar.blockSize - blockFill, rest.count)
                block.withUnsafeMutableBytes { [blockFill] in
                    UnsafeMutableRawBufferPointer(rebasing: $0[blockFill..<(blockFill + count)])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: rest.prefix(count)))
                }
                blockFill += count
                rest = rest.dropFirst(count)
                position += Int64(count)
                if blockFill == Tar.blockSize {
                    blockFill = 0
                    try header()
                }
            case .data(let remaining):
                let count = Int(min(Int64(rest.count), remaining))
                try write(UnsafeRawBufferPointer(rebasing: rest.prefix(count)))
                rest = rest.dropFirst(count)
                position += Int64(count)
                if remaining == Int64(count) {
                    try finishFile()
                } else {
                    phase = .data(remaining: remaining - Int64(count))
                }
            case .sparseMap(let remaining):
                let count = Int(
                    min(
                        Int64(rest.count), Int64(Tar.blockSize - record.count % Tar.blockSize),
                        remaining))
                record.append(contentsOf: rest.prefix(count))
                hasher.update(UnsafeRawBufferPointer(rebasing: rest.prefix(count)))
                rest = rest.dropFirst(count)
                position += Int64(count)
                try sparseMapRead(remaining: remaining - Int64(count))
            case .metadata(let type, let remaining):
                let count = min(rest.count, remaining)
                record.append(contentsOf: rest.prefix(count))
                rest = rest.dropFirst(count)
                position += Int64(count)
                if remaining == count {
                    try apply(type)
                    phase = .skip(remaining: Int64(Tar.padding(for: Int64(record.count))))
                    record = []
                } else {
                    phase = .metadata(type: type, remaining: remaining - count)
                }
            case .skip(let remaining):
                let count = Int(min(Int64(rest.count), remaining))
                rest = rest.dropFirst(count)
                position += Int64(count)
                phase =
                    remaining == Int64(count) ? .header : .skip(remaining: remaining - Int64(count))
            case .ended:
                // tar pads its output to a whole record with zeros; anything else is not ours.
                guard rest.allSatisfy({ $0 == 0 }) else {
                    throw AppdError.archive(
                        "data follows the end-of-archive marker at byte \(position)")
                }
                position += Int64(rest.count)
                rest = rest.dropFirst(rest.count)
            }
        }
        // A zero-length entry ends as soon as its header does.
        if case .skip(0) = phase { phase = .header }
    }

    /// The SHA-256 of each regular file extracted, by its path relative to the directory, as
    /// the installer's walker names it. Complete once `finish` has returned.
    public var fileDigests: [String: [UInt8]] { digests }

    /// Regular files completed so far, and the bytes of file data written.
    public var progress: (files: Int, bytes: Int64) { (digests.count, bytesWritten) }

    /// The file's data is all written: its digest taken, a sparse one given its size.
    mutating func finishFile() throws {
        let size = file?.size ?? 0
        if let sparse, let file, ftruncate(file.fd, off_t(sparse.realSize)) != 0 {
            throw AppdError.system("give \(file.entry) its size of \(sparse.realSize) bytes")
        }
        digests[filePath] = hasher.finish()
        closeFile()
        phase = .skip(remaining: Int64(Tar.padding(for: size)))
    }

    private mutating func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard let file, let base = bytes.baseAddress else { return }
        hasher.update(bytes)
        bytesWritten += Int64(bytes.count)
        if sparse != nil {
            try writeSparse(bytes, to: file.fd, entry: file.entry)
            return
        }
        if case .failure(let error) = writeAll(
            file.fd, UnsafeRawBufferPointer(start: base, count: bytes.count))
        {
            throw AppdError.system("write \(file.entry)", errno: error.rawValue)
        }
    }

    mutating func closeFile() {
        if let file { close(file.fd) }
        file = nil
        sparse = nil
    }
}
