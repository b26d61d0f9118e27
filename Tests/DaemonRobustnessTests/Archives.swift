import Foundation

/// One ustar entry written by hand, so an archive can hold what no honest tar writes.
struct TarEntry {
    var name: String
    var type: Character = "0"
    var mode = "0000644"
    var data: [UInt8] = []
    var link = ""

    static func file(_ name: String, _ data: [UInt8], mode: String = "0000644") -> TarEntry {
        TarEntry(name: name, mode: mode, data: data)
    }

    static func file(_ name: String, _ text: String) -> TarEntry { .file(name, Array(text.utf8)) }

    static func directory(_ name: String) -> TarEntry {
        TarEntry(name: name, type: "5", mode: "0000755")
    }

    static func symlink(_ name: String, to target: String) -> TarEntry {
        TarEntry(name: name, type: "2", mode: "0000777", link: target)
    }

    var bytes: [UInt8] {
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
func tarArchive(_ entries: [TarEntry]) -> [UInt8] {
    entries.flatMap(\.bytes) + [UInt8](repeating: 0, count: 1024)
}

/// The probe app (Examples/Probe, built next to the tests) as `appd install` streams a bundle:
/// the bundle folder's contents. `probe sleep N` runs for N seconds, printing nothing.
func probeBundleArchive(id: String = "com.example.probe") throws -> [UInt8] {
    let executable = try Data(contentsOf: URL(fileURLWithPath: builtExecutable("Probe")))
    let info = plist([
        ("CFBundleIdentifier", "<string>\(id)</string>"),
        ("CFBundleExecutable", "<string>Probe</string>"),
        ("CFBundleName", "<string>Probe</string>"),
        ("CFBundleVersion", "<string>1</string>"),
        ("CFBundlePackageType", "<string>APPL</string>"),
    ])
    let entitlements = plist([("com.apple.security.app-sandbox", "<true/>")])
    return tarArchive([
        .directory("./"),
        .file("./Info.plist", info),
        .file("./Entitlements.plist", entitlements),
        .file("./Probe", Array(executable), mode: "0000755"),
    ])
}

private func plist(_ entries: [(String, String)]) -> String {
    """
    <?xml version="1.0" encoding="UTF-8"?>
    <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
    <plist version="1.0"><dict>
    \(entries.map { "<key>\($0.0)</key>\($0.1)" }.joined(separator: "\n"))
    </dict></plist>
    """
}
