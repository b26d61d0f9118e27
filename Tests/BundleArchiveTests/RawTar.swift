import Foundation

/// One hand-made tar entry, for archives no honest tar would write. Built here independently of
/// the module's encoder, so the tests do not take its word for the format.
struct RawEntry {
    var name: [UInt8]
    var type: Character = "0"
    var mode = "0000644"
    var data: [UInt8] = []
    var link: [UInt8] = []
    /// The size field as written, instead of the data's size in octal.
    var sizeField: [UInt8]?
    var badChecksum = false
    /// The ustar prefix field (names longer than 100 bytes without pax).
    var prefix: [UInt8] = []
    var magic = Array("ustar\u{0}00".utf8)

    init(_ name: String, type: Character = "0", mode: String = "0000644", data: [UInt8] = [], link: String = "") {
        self.name = Array(name.utf8)
        self.type = type
        self.mode = mode
        self.data = data
        self.link = Array(link.utf8)
    }

    static func file(_ name: String, _ text: String = "", mode: String = "0000644") -> RawEntry {
        RawEntry(name, mode: mode, data: Array(text.utf8))
    }

    static func directory(_ name: String) -> RawEntry { RawEntry(name, type: "5", mode: "0000755") }

    static func symlink(_ name: String, to target: String) -> RawEntry {
        RawEntry(name, type: "2", mode: "0000777", link: target)
    }

    /// A pax extended header ('x') holding the given records.
    static func pax(_ records: [(String, [UInt8])], type: Character = "x") -> RawEntry {
        var data: [UInt8] = []
        for (key, value) in records {
            let body = Array(" \(key)=".utf8) + value + [10]
            var length = body.count + 1
            while String(length).utf8.count + body.count != length { length = String(length).utf8.count + body.count }
            data += Array(String(length).utf8) + body
        }
        return RawEntry("PaxHeaders/x", type: type, data: data)
    }

    var header: [UInt8] {
        var block = [UInt8](repeating: 0, count: 512)
        func put(_ bytes: [UInt8], _ offset: Int) {
            for (index, byte) in bytes.enumerated() { block[offset + index] = byte }
        }
        put(Array(name.prefix(100)), 0)
        put(Array(mode.utf8) + [0], 100)
        put(Array("0001750\0".utf8), 108)
        put(Array("0001750\0".utf8), 116)
        put(sizeField ?? Array(String(format: "%011o", data.count).utf8) + [0], 124)
        put(Array("14712345670\0".utf8), 136)
        put([type.asciiValue ?? 0], 156)
        put(Array(link.prefix(100)), 157)
        put(magic, 257)
        put(Array("user".utf8), 265)
        put(Array(prefix.prefix(155)), 345)
        put(Array("        ".utf8), 148)
        let sum = block.reduce(0) { $0 + Int($1) } + (badChecksum ? 1 : 0)
        put(Array(String(format: "%06o", sum).utf8) + [0, 32], 148)
        return block
    }

    /// The header, the data and the padding after it.
    var bytes: [UInt8] {
        header + data + [UInt8](repeating: 0, count: (512 - data.count % 512) % 512)
    }
}

/// The entries one after another, then (unless `end` is false) the two zero blocks.
func rawArchive(_ entries: [RawEntry], end: Bool = true) -> [UInt8] {
    entries.flatMap(\.bytes) + (end ? [UInt8](repeating: 0, count: 1024) : [])
}
