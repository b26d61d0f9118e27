import AppBundle
import AppdBase
import Glibc

/// What pax (`x`) and GNU long-name (`L`, `K`) records said about the entry that follows them.
struct PendingMetadata {
    var path: [UInt8]?
    var linkPath: [UInt8]?
    var size: Int64?
    /// GNU tar's pax encoding of sparse files: the data is a sparse map and the regions, not
    /// the contents. Only format 1.0 (`major` 1, `minor` 0, `name`, `realsize`) is read, and
    /// only where the rules allow sparse files (a restore).
    var sparse = false
    var sparseMajor: [UInt8]?
    var sparseMinor: [UInt8]?
    var sparseName: [UInt8]?
    var sparseRealSize: Int64?
    /// A key of GNU's older sparse formats (0.0, 0.1: the map in the pax header).
    var sparseOld = false

    var isEmpty: Bool { path == nil && linkPath == nil && size == nil && !sparse }

    /// The real size of a sparse file of format 1.0; nil for any other.
    var sparseFormat10: Int64? {
        guard sparse, !sparseOld, sparseMajor == Array("1".utf8), sparseMinor == Array("0".utf8),
            sparseName != nil
        else { return nil }
        return sparseRealSize
    }
}

extension BundleArchiveExtractor {
    /// Acts on the header block just collected in `block`.
    mutating func header() throws {
        let start = position - Int64(Tar.blockSize)
        let isZero = block.allSatisfy { $0 == 0 }
        let after = lastEntry.map { " after entry '\($0)'" } ?? ""
        if sawZeroBlock {
            // One zero block and then more entries is not an archive tar writes.
            guard isZero else {
                throw AppdError.archive(
                    "a lone zero block at byte \(start - 512)\(after) is followed by more data")
            }
            phase = .ended
            return
        }
        if isZero {
            guard pending.isEmpty else {
                throw AppdError.archive(
                    "the archive ends\(after) with a pax or long-name record that has no entry")
            }
            sawZeroBlock = true
            return
        }
        let header = try block.withUnsafeBytes { try TarHeader.decode($0, position: start) }
        let name = pending.sparseName ?? pending.path ?? header.name
        let shown = Tar.shown(name)
        let size = pending.size ?? header.size

        switch header.type {
        case Tar.EntryType.paxEntry, Tar.EntryType.paxGlobal, Tar.EntryType.gnuLongName,
            Tar.EntryType.gnuLongLink:
            guard header.size <= Int64(Tar.maxMetadataBytes) else {
                throw AppdError.archive(
                    Tar.shown(header.name),
                    "is a pax or long-name record of \(header.size) bytes, over the limit of \(Tar.maxMetadataBytes)"
                )
            }
            if header.type == Tar.EntryType.paxGlobal {
                // Global records only carry defaults (times, owners) the installer discards.
                phase = .skip(remaining: header.size + Int64(Tar.padding(for: header.size)))
            } else if header.size == 0 {
                try apply(header.type)
            } else {
                phase = .metadata(type: header.type, remaining: Int(header.size))
            }
            return

        case Tar.EntryType.regular, Tar.EntryType.regularOld:
            guard !pending.sparse || tree.rules.allowsSparseFiles else {
                throw AppdError.archive(shown, "is a GNU sparse file; store it whole")
            }
            try Self.checkMode(header.mode, of: shown, isDirectory: false)
            if pending.sparse {
                guard let realSize = pending.sparseFormat10 else {
                    throw AppdError.archive(
                        shown,
                        "is a GNU sparse file of a format other than pax 1.0 (GNU.sparse.major=1, minor=0, name, realsize)"
                    )
                }
                let (fd, path) = try tree.makeFile(name, mode: header.mode, size: size)
                file = (fd, shown, size)
                filePath = path
                hasher = ContentHasher()
                sparse = SparseFile(realSize: realSize)
                phase = .sparseMap(remaining: size)
            } else {
                let (fd, path) = try tree.makeFile(name, mode: header.mode, size: size)
                if size == 0 {
                    close(fd)
                    digests[path] = ContentHasher().finish()
                } else {
                    file = (fd, shown, size)
                    filePath = path
                    hasher = ContentHasher()
                    phase = .data(remaining: size)
                }
            }

        case Tar.EntryType.hardLink where tree.rules.hardLinks != nil:
            guard size == 0 else {
                throw AppdError.archive(shown, "is a hard link with \(size) bytes of data")
            }
            try tree.makeHardLink(
                name, target: pending.linkPath ?? header.linkName,
                isExtractedFile: { digests[$0] != nil })

        case Tar.EntryType.directory:
            guard size == 0 else {
                throw AppdError.archive(shown, "is a directory with \(size) bytes of data")
            }
            try Self.checkMode(header.mode, of: shown, isDirectory: true)
            try tree.makeDirectory(name)

        case Tar.EntryType.symlink:
            guard size == 0 else {
                throw AppdError.archive(shown, "is a symlink with \(size) bytes of data")
            }
            try tree.makeSymlink(name, target: pending.linkPath ?? header.linkName)

        default:
            throw AppdError.archive(
                shown,
                "is \(Tar.describe(type: header.type)); a bundle holds only files, directories and symlinks"
            )
        }
        pending = PendingMetadata()
        lastEntry = shown
    }

    /// The walker's rule on permission bits (`appd verify` and `--no-daemon` apply it to the
    /// folder), applied to the mode the archive declares: the extracted file gets normalized
    /// bits, so checking it afterwards would let a setuid entry through.
    static func checkMode(_ mode: Int64, of entry: String, isDirectory: Bool) throws {
        let problems = BundleWalker.modeProblems(
            mode_t(truncatingIfNeeded: mode & 0o7777), isDirectory: isDirectory)
        guard problems.isEmpty else {
            throw AppdError.archive(entry, problems.joined(separator: "; "))
        }
    }

    /// Takes in a complete pax or long-name record (in `record`) for the next entry.
    mutating func apply(_ type: UInt8) throws {
        let after = lastEntry.map { " after entry '\($0)'" } ?? ""
        guard type == Tar.EntryType.paxEntry else {
            // GNU writes the name with its NUL terminator.
            let value = Array(record.prefix(while: { $0 != 0 }))
            if type == Tar.EntryType.gnuLongName {
                pending.path = value
            } else {
                pending.linkPath = value
            }
            return
        }
        guard let records = Pax.records(record) else {
            throw AppdError.archive("the pax header\(after) is malformed")
        }
        for (key, value) in records {
            switch key {
            // An empty value takes back an earlier record for the same key.
            case "path": pending.path = value.isEmpty ? nil : value
            case "linkpath": pending.linkPath = value.isEmpty ? nil : value
            case "size":
                guard value.isEmpty || Pax.decimal(value) != nil else {
                    throw AppdError.archive(
                        "the pax header\(after) has a bad size '\(Tar.shown(value))'")
                }
                pending.size = Pax.decimal(value)
            case "GNU.sparse.major": (pending.sparse, pending.sparseMajor) = (true, value)
            case "GNU.sparse.minor": (pending.sparse, pending.sparseMinor) = (true, value)
            case "GNU.sparse.name": (pending.sparse, pending.sparseName) = (true, value)
            case "GNU.sparse.realsize":
                guard let size = Pax.decimal(value) else {
                    throw AppdError.archive(
                        "the pax header\(after) has a bad GNU.sparse.realsize '\(Tar.shown(value))'"
                    )
                }
                (pending.sparse, pending.sparseRealSize) = (true, size)
            case _ where key.hasPrefix("GNU.sparse."):
                (pending.sparse, pending.sparseOld) = (true, true)
            // Times, owners, charsets and vendor keys: the installer sets its own.
            default: break
            }
        }
    }
}
