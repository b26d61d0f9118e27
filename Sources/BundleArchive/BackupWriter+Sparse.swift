import Glibc

/// A file's device and inode: what makes two names one file.
struct FileKey: Hashable {
    let device: UInt64
    let inode: UInt64

    init(_ st: Glibc.stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
    }
}

/// A file with holes as GNU tar writes it in pax format 1.0 (`tar -S --format=pax`), which
/// GNU tar and bsdtar extract as sparse files and the restore's extractor reads back
/// (BundleArchiveExtractor+Sparse): pax records `GNU.sparse.major=1`, `minor=0`, `name` (the
/// real path) and `realsize`; a header named `<folder>/GNUSparseFile.0/<name>`; then, as its
/// data, the map (decimal lines: the number of regions, then each region's offset and length,
/// zeros to the next block) and the regions' bytes one after the other. A file that ends in a
/// hole ends its map with a region of length 0 at its size.
extension BackupWriter {
    /// The most regions a map holds: closer regions are merged (the hole between them written
    /// as zeros) until there are no more; 1,025 lines of two 19-digit numbers stay below the
    /// extractor's 64 KiB.
    static let maxMapRegions = 1024
    /// The regions asked of the kernel before the rest of the file is taken as one region.
    static let maxScannedRegions = 65536
    /// lseek's SEEK_DATA and SEEK_HOLE (Linux 3.1), which Glibc's module leaves out (they need
    /// _GNU_SOURCE).
    static let seekData: Int32 = 3
    static let seekHole: Int32 = 4

    /// The file's data regions below `size` (SEEK_DATA/SEEK_HOLE), at most `maxMapRegions`;
    /// nil when it has no hole (or the filesystem cannot say): it is written whole.
    static func dataRegions(_ fd: Int32, size: Int64) -> [(offset: Int64, length: Int64)]? {
        var regions: [(offset: Int64, length: Int64)] = []
        var offset: Int64 = 0
        while offset < size {
            let data = Int64(lseek(fd, off_t(offset), seekData))
            guard data >= 0 else {
                if errno == ENXIO { break }  // a hole to the end
                return nil
            }
            guard data < size else { break }
            if regions.count == maxScannedRegions {
                regions.append((offset: data, length: size - data))
                break
            }
            let hole = Int64(lseek(fd, off_t(data), seekHole))
            guard hole > data else { return nil }
            let end = min(hole, size)
            regions.append((offset: data, length: end - data))
            offset = end
        }
        guard regions.reduce(0, { $0 + $1.length }) < size else { return nil }
        return merged(regions, limit: maxMapRegions)
    }

    /// Joins regions whose gap is at most 4 KiB, then 8 KiB, …, until at most `limit` remain.
    static func merged(_ regions: [(offset: Int64, length: Int64)], limit: Int)
        -> [(offset: Int64, length: Int64)]
    {
        var result = regions
        var gap: Int64 = 4096
        while result.count > limit {
            var joined = [result[0]]
            for region in result.dropFirst() {
                let last = joined[joined.count - 1]
                let end = last.offset + last.length
                if region.offset - end <= gap {
                    joined[joined.count - 1].length = region.offset + region.length - last.offset
                } else {
                    joined.append(region)
                }
            }
            result = joined
            gap = gap > Int64.max / 2 ? .max : gap * 2
        }
        return result
    }

    /// The map at the start of a sparse member's data, padded with zeros to a whole block.
    static func sparseMap(_ regions: [(offset: Int64, length: Int64)], size: Int64) -> [UInt8] {
        var entries = regions
        if let last = regions.last, last.offset + last.length < size {
            entries.append((offset: size, length: 0))
        } else if regions.isEmpty {
            entries.append((offset: size, length: 0))
        }
        var text = "\(entries.count)\n"
        for entry in entries { text += "\(entry.offset)\n\(entry.length)\n" }
        var bytes = Array(text.utf8)
        bytes += [UInt8](repeating: 0, count: Tar.padding(for: Int64(bytes.count)))
        return bytes
    }

    /// The header's name of a sparse member, as GNU tar makes it (`%d/GNUSparseFile.%p/%f`,
    /// with 0 for the pid): what a tar that knows no sparse files would extract it as.
    static func sparseName(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "GNUSparseFile.0/" + path }
        return path[..<slash] + "/GNUSparseFile.0" + path[slash...]
    }
}
