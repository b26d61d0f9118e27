import Glibc
import LauncherProtocol

/// The time index the output relay keeps beside each log file (docs/app-output.md), in
/// LauncherProtocol's `LogIndexLayout`, which the relay writes with: a 16-byte header
/// (`APPDIDX1`, the log file's inode), then 16-byte records (offset in the log, time). A line's
/// time is that of the last record at or before its first byte.
///
/// Read with `pread` a block at a time, never loaded whole: the index of a 2 GiB log is
/// read as cheaply as that of a small one. The relay is the only writer, but the reader still
/// trusts nothing it reads: a record that goes backwards or past the log's end ends the index.
public final class LogTimeIndex {
    public static let recordSize = LogIndexLayout.recordSize
    /// Records read per block.
    static let block = 256

    let fd: Int32
    /// Records (after the header) the file held when last counted.
    private(set) var count = 0
    private var cache: [(offset: Int64, time: Int64)] = []
    private var cacheStart = 0
    /// The sequential cursor of `time(at:)`.
    private var cursor = -1

    /// The index of the log open as `logFD`, from the first of `candidates` (the names its
    /// index may have: `NAME.idx`, or `NAME.1.idx` once rotated) whose header names that file.
    /// Nil when none does (no index yet, an old relay, a rotation that raced the open).
    public init?(forLog logFD: Int32, candidates: [String]) {
        var info = stat()
        guard logFD >= 0, fstat(logFD, &info) == 0 else { return nil }
        let inode = UInt64(info.st_ino)
        for path in candidates {
            let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            guard fd >= 0 else { continue }
            var header = [UInt8](repeating: 0, count: LogIndexLayout.headerSize)
            let got = header.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
            if got == LogIndexLayout.headerSize, LogIndexLayout.isHeader(header, inode: inode) {
                self.fd = fd
                refresh()
                return
            }
            close(fd)
        }
        return nil
    }

    deinit { close(fd) }

    /// Counts the records again (the relay appends while a follower reads).
    public func refresh() {
        var info = stat()
        guard fstat(fd, &info) == 0 else { return }
        count = max(0, (Int(info.st_size) - LogIndexLayout.headerSize) / Self.recordSize)
    }

    /// Record `index` (0-based, after the header), nil past the end or where it is unreadable.
    func record(_ index: Int) -> (offset: Int64, time: Int64)? {
        guard index >= 0, index < count else { return nil }
        if index < cacheStart || index >= cacheStart + cache.count {
            cacheStart = index - index % Self.block
            let wanted = min(Self.block, count - cacheStart)
            var bytes = [UInt8](repeating: 0, count: wanted * Self.recordSize)
            let got = bytes.withUnsafeMutableBytes {
                pread(
                    fd, $0.baseAddress, $0.count,
                    off_t(LogIndexLayout.headerSize + cacheStart * Self.recordSize))
            }
            let records = max(0, got / Self.recordSize)
            cache = (0..<records).map { record in
                let entry = LogIndexLayout.record(bytes, record * Self.recordSize)
                return (entry.offset ?? Int64.max, entry.time)
            }
        }
        let position = index - cacheStart
        return position < cache.count ? cache[position] : nil
    }

    /// The time of the byte at `offset` of the log, for offsets that never go backwards (a
    /// reader going through the file once). Nil before the first record.
    public func time(at offset: Int64) -> Int64? {
        if cursor + 1 >= count { refresh() }
        if cursor < 0 || (record(cursor)?.offset ?? 0) > offset {
            // The first lookup (a tail or since start deep in the file) finds its record by
            // binary search; the walk goes on from there.
            cursor = lastRecord(atOrBefore: offset)
        }
        while let next = record(cursor + 1), next.offset <= offset,
            cursor < 0 || next.offset >= (record(cursor)?.offset ?? 0)
        {
            cursor += 1
        }
        return cursor >= 0 ? record(cursor)?.time : nil
    }

    /// The index of the last record at or before `offset` (-1: none).
    func lastRecord(atOrBefore offset: Int64) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = low + (high - low) / 2
            guard let record = record(middle) else { break }
            if record.offset <= offset { low = middle + 1 } else { high = middle }
        }
        return low - 1
    }

    /// The offset of the first record whose time is at or after `time`, or nil when every
    /// record is older. A binary search: the relay writes times in order (a wall clock set back
    /// can make this land a little off, never past the file).
    public func firstOffset(atOrAfter time: Int64) -> Int64? {
        var low = 0
        var high = count
        while low < high {
            let middle = low + (high - low) / 2
            guard let record = record(middle) else { return nil }
            if record.time < time { low = middle + 1 } else { high = middle }
        }
        return record(low)?.offset
    }
}
