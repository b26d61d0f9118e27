import Foundation

/// A zip written byte by byte, so a test can put in it what no honest zip writer would: a `..`
/// name, a declared size that lies, an encrypted flag, a central directory that is cut short.
/// Compressed entries hold deflate's stored blocks (type 00): valid deflate whose inflated
/// bytes are the data itself, so no compressor is needed.
struct CraftedZip {
    struct Entry {
        var name: String
        var data: [UInt8] = []
        /// 0 stored, 8 deflate.
        var method: UInt16 = 0
        /// The Unix mode, type bits included, as the central directory's external attributes.
        var mode: UInt32 = 0o100644
        var flags: UInt16 = 0
        /// The central directory's flags, when they are to differ from the local header's.
        var centralFlags: UInt16?
        /// What the headers declare, when it is to differ from the data.
        var declaredSize: UInt32?
        var declaredCompressedSize: UInt32?
        var crc: UInt32?
    }

    var entries: [Entry] = []
    /// The entry count the end record declares, when it is to differ from the entries'.
    var declaredCount: UInt16?

    mutating func file(_ name: String, _ text: String, mode: UInt32 = 0o100644) {
        entries.append(Entry(name: name, data: Array(text.utf8), mode: mode))
    }

    mutating func directory(_ name: String) {
        entries.append(Entry(name: name, mode: 0o040755))
    }

    mutating func symlink(_ name: String, to target: String) {
        entries.append(Entry(name: name, data: Array(target.utf8), mode: 0o120777))
    }

    /// `data` as raw deflate made of stored blocks.
    static func deflateStored(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var rest = data[...]
        repeat {
            let piece = rest.prefix(65535)
            rest = rest.dropFirst(piece.count)
            let length = UInt16(piece.count)
            out.append(rest.isEmpty ? 1 : 0)
            out += le(length) + le(~length)
            out += piece
        } while !rest.isEmpty
        return out
    }

    var bytes: [UInt8] {
        var out: [UInt8] = []
        var central: [UInt8] = []
        for entry in entries {
            let stored = entry.method == 8 ? Self.deflateStored(entry.data) : entry.data
            let crc = entry.crc ?? crc32(entry.data)
            let size = entry.declaredSize ?? UInt32(entry.data.count)
            let compressed = entry.declaredCompressedSize ?? UInt32(stored.count)
            let name = Array(entry.name.utf8)
            let offset = UInt32(out.count)
            out += le(UInt32(0x0403_4b50)) + le(UInt16(20)) + le(entry.flags) + le(entry.method)
            out += le(UInt16(0)) + le(UInt16(0x21)) + le(crc) + le(compressed) + le(size)
            out += le(UInt16(name.count)) + le(UInt16(0)) + name + stored
            central += le(UInt32(0x0201_4b50)) + le(UInt16(3 << 8 | 20)) + le(UInt16(20))
            central +=
                le(entry.centralFlags ?? entry.flags) + le(entry.method) + le(UInt16(0))
                + le(UInt16(0x21))
            central += le(crc) + le(compressed) + le(size) + le(UInt16(name.count))
            central += le(UInt16(0)) + le(UInt16(0)) + le(UInt16(0)) + le(UInt16(0))
            central += le(entry.mode << 16) + le(offset) + name
        }
        let count = declaredCount ?? UInt16(entries.count)
        let centralOffset = UInt32(out.count)
        out += central
        out += le(UInt32(0x0605_4b50)) + le(UInt16(0)) + le(UInt16(0)) + le(count) + le(count)
        out += le(UInt32(central.count)) + le(centralOffset) + le(UInt16(0))
        return out
    }

    /// Writes the zip to `path`.
    func write(to path: String) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }
}

private func le<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
    withUnsafeBytes(of: value.littleEndian) { Array($0) }
}

/// CRC-32 (IEEE 802.3), as zip stores it.
func crc32(_ data: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in data {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
    }
    return ~crc
}
