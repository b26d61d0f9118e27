import AppdAPI
import Foundation
import Testing

/// A backup holds what the app really uses (issue 35 §4): its holes are not written, a file
/// with many names is written once, and the whole is refused when over its cap. A real
/// sandboxed app makes the files; a real daemon takes and restores them.
@Suite("backups bounded by what the app uses", .serialized, rootOnly)
struct BackupBoundsTests {
    static let id = "com.example.backup"
    /// 1 TiB of holes: a backup that wrote them would never end.
    static let huge: Int64 = 1 << 40
    static let linked = 10_000_000
    static let links = 100

    /// The app makes a 1 TiB sparse file and a 10 MB file with 100 more names.
    static func fill(_ daemon: TestDaemon) throws {
        try daemon.installProbe(Self.id)
        var steps = [
            "sparse", "Documents/huge", "\(huge)", "file", "Documents/big", "\(linked)", "mkdir",
            "Library/links",
        ]
        for n in 0..<links { steps += ["hardlink", "Documents/big", "Library/links/\(n)"] }
        try BackupTests.write(daemon, steps)
    }

    static func size(_ path: String) -> (bytes: Int64, allocated: Int64, links: Int)? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return (Int64(st.st_size), Int64(st.st_blocks) * 512, Int(st.st_nlink))
    }

    static func bytes(_ path: String, at offset: Int64, count: Int) -> [UInt8] {
        guard let handle = FileHandle(forReadingAtPath: path) else { return [] }
        defer { try? handle.close() }
        try? handle.seek(toOffset: UInt64(offset))
        return Array((try? handle.read(upToCount: count)) ?? Data())
    }

    @Test("a 1 TiB sparse file and 100 hard links make a backup of about 10 MB, restored as such")
    func sparseAndLinks() throws {
        // The cap is four times the data: a backup that wrote the holes or every name is over.
        let daemon = try TestDaemon(config: "[Storage]\nBackupMaxBytes=40M\n")
        try Self.fill(daemon)
        let taken = try BackupTests.backup(daemon)
        #expect(taken.code == 0, "\(taken.output)")
        let file = try #require(Self.size(taken.file))
        #expect(file.bytes < Int64(Self.linked) + (2 << 20), "backup of \(file.bytes) bytes")
        let list = try BackupTests.listing(taken.file)
        #expect(list.contains("Library/links/7 link to Documents/big"), "\(list.prefix(3000))")
        // GNU tar reads the sparse member back at its real size.
        #expect(
            list.contains(" \(Self.huge) 1970-01-01 00:00 Documents/huge"), "\(list.prefix(3000))")

        // The app changes its data; the restore brings the backup's back, sparse and linked.
        try BackupTests.write(
            daemon, ["file", "Documents/huge", "3", "file", "Library/links/3", "2"])
        let restored = try daemon.run("appd", ["restore", Self.id, taken.file])
        #expect(restored.code == 0, "\(restored.output)")
        let data = try daemon.dataContainer(Self.id)
        let huge = try #require(Self.size("\(data)/Documents/huge"))
        #expect(huge.bytes == Self.huge)
        #expect(huge.allocated < 1 << 20, "\(huge.allocated) bytes allocated")
        #expect(
            Self.bytes("\(data)/Documents/huge", at: 1 << 20, count: 4096)
                == Array(repeating: UInt8(ascii: "s"), count: 4096))
        #expect(
            Self.bytes("\(data)/Documents/huge", at: Self.huge - 4096, count: 4096)
                == Array(repeating: UInt8(ascii: "e"), count: 4096))
        #expect(
            Self.bytes("\(data)/Documents/huge", at: 1 << 30, count: 8)
                == [UInt8](repeating: 0, count: 8))
        #expect(Self.size("\(data)/Documents/big")?.links == Self.links + 1)
        #expect(Self.size("\(data)/Library/links/3")?.bytes == Int64(Self.linked))
        let app = try daemon.client.app(Self.id)
        #expect(BackupTests.owner("\(data)/Library/links/3") == app.uid)
        // The app reads and writes what came back, in its sandbox.
        try BackupTests.write(daemon, ["file", "Documents/after", "1"])
    }

    @Test("a backup over its cap is refused with one line naming the cap, and leaves no file")
    func overTheCap() throws {
        let daemon = try TestDaemon(config: "[Storage]\nBackupMaxBytes=5M\n")
        try Self.fill(daemon)
        let refused = try BackupTests.backup(daemon)
        #expect(refused.code != 0)
        #expect(
            refused.output.contains("over its cap of 5242880 bytes ([Storage] BackupMaxBytes="),
            "\(refused.output)")
        #expect(!FileManager.default.fileExists(atPath: refused.file))

        // Without the key, the app's quota sets the cap.
        let quota = try TestDaemon(config: "[Sandbox]\nDataQuota=4M\n")
        try quota.installProbe(Self.id)
        // Where the filesystem does not enforce the quota the app can write past it (twice
        // the quota is the cap: one container and as much for the archive's records).
        try BackupTests.write(quota, ["file", "Documents/a", "9000000"])
        let data = try quota.dataContainer(Self.id)
        if Self.size("\(data)/Documents/a")?.bytes == 9_000_000 {
            let over = try BackupTests.backup(quota)
            #expect(over.code != 0)
            #expect(over.output.contains("the app's DataQuota=4194304"), "\(over.output)")
        }
    }
}
