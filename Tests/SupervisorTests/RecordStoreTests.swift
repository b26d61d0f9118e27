import AppdAPI
import Foundation
import Glibc
import Testing

@testable import Supervisor

/// Instance records: written in place while they fit a page (no inode freed per state change),
/// replaced through a rename otherwise; either way the file reads back as the last record saved.
@Suite("instance records: in place within a page, renamed beyond it, always whole")
struct RecordStoreTests {
    static func record(id: String, arguments: [String], state: InstanceState = .launching)
        -> Instance
    {
        Instance(
            id: id, app: "com.example.records", uid: 2_000_000_001, arguments: arguments,
            launchedBy: 0, startedAt: Date(timeIntervalSince1970: 1_700_000_000),
            log: "/var/log/x.log", state: state)
    }

    static func withStore(_ body: (RecordStore) throws -> Void) throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent(
            "records-\(UUID().uuidString)"
        ).path
        defer { try? FileManager.default.removeItem(atPath: base) }
        try body(RecordStore(runtimeDirectory: base))
    }

    static func inode(_ path: String) -> ino_t {
        var status = stat()
        return stat(path, &status) == 0 ? status.st_ino : 0
    }

    @Test("a shorter record overwrites a longer one in place: same inode, padded, reads back new")
    func shorterInPlace() throws {
        try Self.withStore { store in
            let id = "0123456789ab"
            try store.save(
                Self.record(id: id, arguments: Array(repeating: "long-argument", count: 20)))
            let path = store.recordPath(id)
            let inode = Self.inode(path)
            let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int
            try store.save(Self.record(id: id, arguments: ["short"], state: .active))
            #expect(Self.inode(path) == inode, "rewritten in place, not replaced")
            #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int == size)
            let loaded = store.loadAll()
            #expect(loaded.unreadable.isEmpty)
            #expect(loaded.records.map(\.arguments) == [["short"]])
            #expect(loaded.records.first?.state == .active)
            #expect(!FileManager.default.fileExists(atPath: path + ".tmp"))
        }
    }

    @Test("a record beyond one page is replaced through a rename and still reads back whole")
    func beyondPageRenamed() throws {
        try Self.withStore { store in
            let id = "ba9876543210"
            try store.save(Self.record(id: id, arguments: ["a"]))
            let path = store.recordPath(id)
            let inode = Self.inode(path)
            let big = Array(repeating: String(repeating: "x", count: 100), count: 60)
            try store.save(Self.record(id: id, arguments: big))
            #expect(Self.inode(path) != inode, "over 4096 bytes: written to a new file and renamed")
            #expect(store.loadAll().records.first?.arguments == big)
            // And back under a page: the big file is not written in place (it exceeds a page).
            try store.save(Self.record(id: id, arguments: ["b"]))
            #expect(store.loadAll().records.first?.arguments == ["b"])
            #expect(store.loadAll().unreadable.isEmpty)
        }
    }

    @Test("a symlink planted at a record's path is replaced, never written through")
    func symlinkNotFollowed() throws {
        try Self.withStore { store in
            let id = "aaaaaaaaaaaa"
            let victim = store.directory + "/victim"
            try Data("keep".utf8).write(to: URL(fileURLWithPath: victim))
            #expect(symlink(victim, store.recordPath(id)) == 0)
            try store.save(Self.record(id: id, arguments: ["c"]))
            #expect(try String(contentsOfFile: victim, encoding: .utf8) == "keep")
            #expect(store.loadAll().records.first?.arguments == ["c"])
        }
    }
}
