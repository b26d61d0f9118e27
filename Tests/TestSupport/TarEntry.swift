import Foundation

/// One ustar entry written by hand, so an archive can hold what no honest tar writes.
public struct TarEntry {
    public init(
        name: String, type: Character = "0", mode: String = "0000644", data: [UInt8] = [],
        link: String = ""
    ) {
        self.name = name
        self.type = type
        self.mode = mode
        self.data = data
        self.link = link
    }

    public var name: String
    public var type: Character = "0"
    public var mode = "0000644"
    public var data: [UInt8] = []
    public var link = ""

    public static func file(_ name: String, _ data: [UInt8], mode: String = "0000644") -> TarEntry {
        TarEntry(name: name, mode: mode, data: data)
    }

    public static func file(_ name: String, _ text: String) -> TarEntry {
        .file(name, Array(text.utf8))
    }

    public static func directory(_ name: String) -> TarEntry {
        TarEntry(name: name, type: "5", mode: "0000755")
    }

    public static func symlink(_ name: String, to target: String) -> TarEntry {
        TarEntry(name: name, type: "2", mode: "0000777", link: target)
    }

    public var bytes: [UInt8] {
        var block = [UInt8](repeating: 0, count: 512)
        func put(_ text: String, _ offset: Int) {
            for (index, byte) in text.utf8.enumerated() { block[offset + index] = byte }
        }
        put(name, 0)
        put(mode + "\0", 100)
        put("0000000\0", 108)
        put("0000000\0", 116)
        put(String(format: "%011o", data.count) + "\0", 124)
        put("14712345670\0", 136)
        put(String(type), 156)
        put(link, 157)
        put("ustar\u{0}00", 257)
        put("root", 265)
        put("root", 297)
        put("        ", 148)
        let sum = block.reduce(0) { $0 + Int($1) }
        put(String(format: "%06o", sum) + "\0 ", 148)
        return block + data + [UInt8](repeating: 0, count: (512 - data.count % 512) % 512)
    }
}

/// The entries, then the two zero blocks that end an archive.
public func tarArchive(_ entries: [TarEntry]) -> [UInt8] {
    entries.flatMap(\.bytes) + [UInt8](repeating: 0, count: 1024)
}
