/// The time index the output relay keeps beside each log file (docs/app-output.md): `NAME.idx`
/// (`NAME.1.idx` beside the rotated `NAME.1`), a 16-byte header (`APPDIDX1`, the log file's
/// inode), then 16-byte records, each the offset in the log from which the bytes were read at
/// that time (u64, microseconds since the epoch as i64). Header and records are two
/// little-endian u64s each. A line's time is that of the last record at or before its first byte.
public enum LogIndexLayout {
    /// `APPDIDX1` read as a little-endian u64.
    public static let magic: UInt64 = 0x3158_4449_4450_5041
    public static let headerSize = 16
    public static let recordSize = 16
    /// The relay's rotation: `NAME` becomes `NAME.1`.
    public static let rotatedSuffix = ".1"
    public static let indexSuffix = ".idx"

    public static func indexName(ofLog name: String) -> String { name + indexSuffix }
    public static func rotatedName(ofLog name: String) -> String { name + rotatedSuffix }

    /// The header's or a record's two values as written (a tuple: one 16-byte write, and no
    /// array type for the launcher's runtime to instantiate).
    public static func entry(_ first: UInt64, _ second: UInt64) -> (UInt64, UInt64) {
        (first.littleEndian, second.littleEndian)
    }

    /// The u64 at `start` of `bytes` (little-endian); the caller checks the bounds.
    public static func u64(_ bytes: [UInt8], _ start: Int) -> UInt64 {
        var value: UInt64 = 0
        for byte in (0..<8).reversed() { value = value << 8 | UInt64(bytes[start + byte]) }
        return value
    }

    /// Whether 16 bytes are the header of the index of the log file with this inode.
    public static func isHeader(_ bytes: [UInt8], inode: UInt64) -> Bool {
        bytes.count >= headerSize && u64(bytes, 0) == magic && u64(bytes, 8) == inode
    }

    /// A record read back: the log offset (nil when past Int64, which no log reaches) and the time.
    public static func record(_ bytes: [UInt8], _ start: Int) -> (offset: Int64?, time: Int64) {
        (Int64(exactly: u64(bytes, start)), Int64(bitPattern: u64(bytes, start + 8)))
    }
}
