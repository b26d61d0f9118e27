import AppdBase
import Glibc

/// A sparse file of GNU tar's pax format 1.0 (BackupWriter+Sparse has the layout), which a
/// restore takes back as a sparse file: each region written where the map puts it, the holes
/// left as holes, the file then given its real size. The map is hostile like the rest: at most
/// 64 KiB, decimal numbers without sign or overflow, regions in order and apart, inside the real
/// size, their lengths adding up to the data that follows it, and nothing but zeros after it in
/// its last block. The digest is of the member's data as stored, map included (`BackupFile`).
struct SparseFile {
    let realSize: Int64
    var regions: [(offset: Int64, length: Int64)] = []
    /// The region being written, and how much of it is.
    var index = 0
    var written: Int64 = 0

    /// The most lines a map may hold (BackupWriter.maxMapRegions and the final empty region,
    /// with room for GNU tar's own maps).
    static let maxRegions = 4096
}

extension BundleArchiveExtractor {
    /// A block of the map has been read into `record`; once the map is whole, the regions'
    /// data follows.
    mutating func sparseMapRead(remaining: Int64) throws {
        guard let file, var state = sparse else { return }
        func bad(_ problem: String) -> AppdError { .archive(file.entry, problem) }
        guard record.count % Tar.blockSize == 0 || remaining == 0 else {
            phase = .sparseMap(remaining: remaining)
            return
        }
        guard let regions = try Self.sparseMap(record, entry: file.entry) else {
            guard remaining > 0 else { throw bad("ends inside its sparse map") }
            guard record.count < Tar.maxMetadataBytes else {
                throw bad("has a sparse map over \(Tar.maxMetadataBytes) bytes")
            }
            phase = .sparseMap(remaining: remaining)
            return
        }
        var end: Int64 = 0
        var data: Int64 = 0
        for region in regions {
            guard region.offset >= end, region.length <= state.realSize - region.offset else {
                throw bad(
                    "has a sparse map whose regions overlap, are out of order or pass its size of \(state.realSize) bytes"
                )
            }
            end = region.offset + region.length
            data += region.length
        }
        guard data == remaining else {
            throw bad("has a sparse map of \(data) bytes of data, and \(remaining) follow it")
        }
        state.regions = regions.filter { $0.length > 0 }
        sparse = state
        record = []
        if remaining == 0 {
            try finishFile()
        } else {
            phase = .data(remaining: remaining)
        }
    }

    /// The regions in `bytes` (whole blocks, or the member's end); nil while the map goes on.
    static func sparseMap(_ bytes: [UInt8], entry: String) throws -> [(
        offset: Int64, length: Int64
    )]? {
        func bad() -> AppdError { .archive(entry, "has a malformed sparse map") }
        var numbers: [Int64] = []
        var value: Int64 = 0
        var digits = 0
        var needed = -1
        for (index, byte) in bytes.enumerated() {
            if byte == UInt8(ascii: "\n") {
                guard digits > 0 else { throw bad() }
                numbers.append(value)
                (value, digits) = (0, 0)
                if needed < 0 {
                    guard numbers[0] <= Int64(SparseFile.maxRegions) else {
                        throw AppdError.archive(
                            entry, "has a sparse map of over \(SparseFile.maxRegions) regions")
                    }
                    needed = 1 + 2 * Int(numbers[0])
                }
                if numbers.count == needed {
                    guard bytes[(index + 1)...].allSatisfy({ $0 == 0 }) else { throw bad() }
                    return stride(from: 1, to: numbers.count, by: 2).map {
                        (numbers[$0], numbers[$0 + 1])
                    }
                }
            } else if let digit = byte >= 48 && byte <= 57 ? Int64(byte - 48) : nil {
                let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times.addingReportingOverflow(digit)
                guard !overflow1 && !overflow2 else { throw bad() }
                value = sum
                digits += 1
            } else {
                throw bad()
            }
        }
        return nil
    }

    /// Writes the regions' data where the map puts it.
    mutating func writeSparse(_ bytes: UnsafeRawBufferPointer, to fd: Int32, entry: String) throws {
        guard var state = sparse, let base = bytes.baseAddress else { return }
        var done = 0
        while done < bytes.count, state.index < state.regions.count {
            let region = state.regions[state.index]
            let step = Int(min(Int64(bytes.count - done), region.length - state.written))
            var offset = 0
            while offset < step {
                let wrote = retryingInterrupts {
                    pwrite(
                        fd, base + done + offset, step - offset,
                        off_t(region.offset + state.written + Int64(offset)))
                }
                guard wrote > 0 else { throw AppdError.system("write \(entry)") }
                offset += wrote
            }
            done += step
            state.written += Int64(step)
            if state.written == region.length {
                state.index += 1
                state.written = 0
            }
        }
        sparse = state
    }
}
