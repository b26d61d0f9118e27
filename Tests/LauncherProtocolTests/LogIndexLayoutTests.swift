import Foundation
import LauncherProtocol
import Supervisor
import TestSupport
import Testing

/// The time index's layout (docs/app-output.md): written by appd-exec's output relay with
/// `LogIndexLayout`, read by the daemon's `LogTimeIndex`.
@Suite("log time-index layout")
struct LogIndexLayoutTests {
    /// Writes `log` and its index (header for `inode` or the log's own, then `records`).
    static func write(
        in directory: String, log: [UInt8], records: [(UInt64, Int64)], inode: UInt64? = nil
    ) throws -> (logFD: Int32, index: String) {
        let logPath = "\(directory)/app.log"
        try Data(log).write(to: URL(fileURLWithPath: logPath))
        var info = stat()
        guard stat(logPath, &info) == 0 else { throw CocoaError(.fileNoSuchFile) }
        var entries = [LogIndexLayout.entry(LogIndexLayout.magic, inode ?? UInt64(info.st_ino))]
        for (offset, time) in records {
            entries.append(LogIndexLayout.entry(offset, UInt64(bitPattern: time)))
        }
        let bytes = entries.withUnsafeBytes { Array($0) }
        let index = "\(directory)/\(LogIndexLayout.indexName(ofLog: "app.log"))"
        try Data(bytes).write(to: URL(fileURLWithPath: index))
        return (open(logPath, O_RDONLY | O_CLOEXEC), index)
    }

    @Test("records the relay's layout writes are the times the daemon reads")
    func roundTrip() throws {
        let directory = try makeTemporaryDirectory("/tmp/appd-index-test.XXXXXX")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (fd, index) = try Self.write(
            in: directory, log: Array("one\ntwo\nthree\n".utf8),
            records: [(0, 1_000_000), (4, 2_000_000), (8, -5)])
        defer { close(fd) }
        let reader = try #require(LogTimeIndex(forLog: fd, candidates: [index]))
        #expect(reader.time(at: 0) == 1_000_000)
        #expect(reader.time(at: 3) == 1_000_000)
        #expect(reader.time(at: 4) == 2_000_000)
        #expect(reader.time(at: 9) == -5)
        #expect(reader.firstOffset(atOrAfter: 1_500_000) == 4)
    }

    @Test("the header is APPDIDX1 and the log's inode; another file's index is not read")
    func header() throws {
        #expect(
            withUnsafeBytes(of: LogIndexLayout.magic.littleEndian) { Array($0) }
                == Array("APPDIDX1".utf8))
        let directory = try makeTemporaryDirectory("/tmp/appd-index-test.XXXXXX")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (fd, index) = try Self.write(
            in: directory, log: Array("x\n".utf8), records: [(0, 1)], inode: 1)
        defer { close(fd) }
        #expect(LogTimeIndex(forLog: fd, candidates: [index]) == nil)
    }

    @Test("the rotated log's index is NAME.1.idx")
    func names() {
        #expect(
            LogIndexLayout.indexName(ofLog: LogIndexLayout.rotatedName(ofLog: "a.log"))
                == "a.log.1.idx")
    }
}
