import AppdBase
import BundleArchive
import Foundation
import Testing

/// `GzipReader`: what `appd install` makes of a gzip'd tar before the daemon sees a plain one.
@Suite("inflating a gzip stream")
struct GzipReaderTests {
    /// `bytes` gzip'd by the host's gzip.
    func gzip(_ bytes: [UInt8], in scratch: Scratch, name: String) throws -> [UInt8] {
        let path = "\(scratch.path)/\(name)"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        try ChildProcess("/bin/gzip", ["-n", "-k", path], stdout: .inherit).waitUntilExit()
        return [UInt8](try Data(contentsOf: URL(fileURLWithPath: path + ".gz")))
    }

    /// All of `compressed`, read through a file as `appd install` reads one, in 1000-byte
    /// reads (smaller than the input buffer, so members and padding cross reads).
    func inflate(_ compressed: [UInt8], in scratch: Scratch) throws -> [UInt8] {
        let path = "\(scratch.path)/input-\(UUID().uuidString)"
        try Data(compressed).write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        #expect(fd >= 0)
        defer { close(fd) }
        var head = [UInt8](repeating: 0, count: 2)
        #expect(read(fd, &head, 2) == 2)
        let reader = try GzipReader(fd: fd, head: head, shown: "test.gz")
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1000)
        while true {
            let count = try buffer.withUnsafeMutableBytes { try reader.read(into: $0) }
            if count == 0 { return output }
            output += buffer[..<count]
        }
    }

    @Test(
        "members one after the other and zero padding are read as gzip -d reads them; CRC and length are checked"
    )
    func members() throws {
        let scratch = Scratch()
        let first = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31 >> 3) }
        let second = Array("second member\n".utf8)
        let a = try gzip(first, in: scratch, name: "a")
        let b = try gzip(second, in: scratch, name: "b")
        #expect(try inflate(a, in: scratch) == first)
        #expect(
            try inflate(a + b + [UInt8](repeating: 0, count: 5000), in: scratch) == first + second)

        #expect(throws: AppdError.self) { try inflate(Array(a.prefix(a.count - 4)), in: scratch) }
        var badCRC = a
        badCRC[badCRC.count - 6] ^= 0xFF
        let crc = #expect(throws: AppdError.self) { try inflate(badCRC, in: scratch) }
        #expect(
            crc?.message.contains("test.gz: not valid gzip data (incorrect data check)") == true,
            "\(String(describing: crc))")
        let garbage = #expect(throws: AppdError.self) {
            try inflate(a + Array("junk".utf8), in: scratch)
        }
        #expect(garbage?.message.contains("data that is not gzip follows") == true)
        let truncated = #expect(throws: AppdError.self) {
            try inflate(Array(a.prefix(a.count / 2)), in: scratch)
        }
        #expect(truncated?.message == "test.gz: the gzip stream is truncated")
    }
}
