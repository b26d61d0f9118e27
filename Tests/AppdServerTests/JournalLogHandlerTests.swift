import Foundation
import Logging
import Testing

@testable import AppdServer

@Suite("appd's log entries in the journal's native protocol")
struct JournalLogHandlerTests {
    @Test("an entry carries MESSAGE, PRIORITY, SYSLOG_IDENTIFIER and the metadata as APPD_ fields; multi-line values are length-prefixed")
    func fields() throws {
        let path = "/tmp/appd-journal-test-\(getpid())"
        unlink(path)
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(fd); unlink(path) }
        guard var (address, length) = SystemdNotifier.unixAddress(path) else { throw POSIXError(.EINVAL) }
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        try #require(bound == 0)

        var logger = Logger(label: "appd") { JournalLogHandler(label: $0, socketPath: path) }
        logger[metadataKey: "app"] = "com.example.hello"
        logger.warning("two\nlines", metadata: ["instance": "0a1b2c", "pid": "42", "exit-code": "3"])

        var buffer = [UInt8](repeating: 0, count: 65536)
        let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        try #require(count > 0)
        let datagram = Array(buffer[0..<count])
        let text = String(decoding: datagram, as: UTF8.self)
        for line in ["PRIORITY=4", "SYSLOG_IDENTIFIER=appd", "APPD_APP=com.example.hello", "APPD_INSTANCE=0a1b2c", "APPD_PID=42", "APPD_EXIT_CODE=3"] {
            #expect(text.split(separator: "\n").contains(Substring(line)), "\(line) missing in \(text)")
        }
        // MESSAGE\n, then the length as 64-bit little endian, the bytes, \n.
        let expected = Array("MESSAGE\n".utf8) + [9, 0, 0, 0, 0, 0, 0, 0] + Array("two\nlines\n".utf8)
        #expect(datagram.starts(with: expected))
    }

    @Test("the journal is used only when JOURNAL_STREAM names the stream stderr is")
    func journalStream() {
        var info = stat()
        fstat(2, &info)
        #expect(JournalLogHandler.stderrIsJournal(["JOURNAL_STREAM": "\(info.st_dev):\(info.st_ino)"]))
        #expect(!JournalLogHandler.stderrIsJournal(["JOURNAL_STREAM": "\(info.st_dev):\(info.st_ino + 1)"]))
        #expect(!JournalLogHandler.stderrIsJournal([:]))
    }
}
