import Foundation
import Glibc
import Testing

@testable import Supervisor

/// LogReader's seeking and stamping over real files, without a daemon or root: where the last
/// N lines of a rotated log begin, where a line begins, and the time in front of each line.
@Suite("the log reader: tail across the rotation, line starts, timestamps")
struct LogReaderTests {
    /// Files with `texts` (oldest first), opened read-only, removed after `body`.
    static func withFiles(_ texts: [String], _ body: ([Int32]) throws -> Void) throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent(
            "logreader-\(UUID().uuidString)"
        ).path
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        var fds: [Int32] = []
        defer { for fd in fds { close(fd) } }
        for (index, text) in texts.enumerated() {
            let path = "\(base)/\(index).log"
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            fds.append(open(path, O_RDONLY | O_CLOEXEC))
        }
        try body(fds)
    }

    @Test("tail: the last lines begin in the rotated file when the current one holds fewer")
    func tailAcrossRotation() throws {
        try Self.withFiles(["a\nb\nc\n", "d\ne\n"]) { fds in
            #expect(LogReader.tailStart(fds, lines: 1, limit: 1 << 20) == (1, 2))
            #expect(
                LogReader.tailStart(fds, lines: 2, limit: 1 << 20) == (0, 6),
                "the end of the rotated file: d, e")
            #expect(LogReader.tailStart(fds, lines: 3, limit: 1 << 20) == (0, 4), "c, d, e")
            #expect(
                LogReader.tailStart(fds, lines: 0, limit: 1 << 20) == (1, 4), "nothing: the end")
            #expect(LogReader.tailStart(fds, lines: 99, limit: 1 << 20) == (0, 0), "all of it")
            // A missing rotated file (-1) is empty.
            #expect(LogReader.tailStart([-1, fds[1]], lines: 5, limit: 1 << 20) == (0, 0))
        }
    }

    @Test("a line start: the offset itself after a newline, else just past the next one")
    func lineStarts() throws {
        try Self.withFiles(["first\nsecond\nthird"]) { fds in
            #expect(LogReader.lineStart(fds[0], atOrAfter: 0, size: 18) == 0)
            #expect(LogReader.lineStart(fds[0], atOrAfter: 6, size: 18) == 6)
            #expect(LogReader.lineStart(fds[0], atOrAfter: 3, size: 18) == 6)
            #expect(LogReader.lineStart(fds[0], atOrAfter: 14, size: 18) == 18, "no newline left")
        }
    }

    @Test(
        "timestamps: each line that starts gets the time, one long line only once, unknown times dashes"
    )
    func stamps() {
        var stamper = LineStamper(timestamps: true)
        let text = Array("one\ntw".utf8)
        let out = String(decoding: stamper.stamp(text[...], at: 0), as: UTF8.self)
        let unknown = "-" + String(repeating: " ", count: 27)
        #expect(out == unknown + "one\n" + unknown + "tw")
        let rest = String(decoding: stamper.stamp(Array("o\n".utf8)[...], at: 6), as: UTF8.self)
        #expect(rest == "o\n", "the line began in the previous piece")
        #expect(
            String(decoding: LineStamper.format(1_764_150_000_250_000), as: UTF8.self)
                == "2025-11-26T09:40:00.250000Z ")
        #expect(LineStamper.format(nil).count == LineStamper.format(0).count)
    }
}
