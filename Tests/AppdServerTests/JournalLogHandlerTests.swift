import Foundation
import Logging
import Synchronization
import Testing

@testable import AppdServer

/// What appd hands libsystemd for its own log entries (the wire format is libsystemd's; the
/// daemon test `JournalTests` reads it from a real daemon).
@Suite("appd's log entries for the journal")
struct JournalLogHandlerTests {
    final class Captured: Sendable {
        let entries = Mutex<[[(String, String)]]>([])
        var all: [[(String, String)]] { entries.withLock { $0 } }
    }

    @Test(
        "an entry carries MESSAGE, PRIORITY, SYSLOG_IDENTIFIER and the metadata as APPD_ fields, multi-line values whole"
    )
    func fields() throws {
        let captured = Captured()
        let writer = JournalWriter { fields in
            captured.entries.withLock { $0.append(fields) }
            return 0
        }
        var logger = Logger(label: "appd") { JournalLogHandler(label: $0, writer: writer) }
        logger[metadataKey: "app"] = "com.example.hello"
        logger.warning(
            "two\nlines", metadata: ["instance": "0a1b2c", "pid": "42", "exit-code": "3"])
        writer.flush()
        let entry = try #require(captured.all.first)
        let fields = Dictionary(entry, uniquingKeysWith: { $1 })
        #expect(fields["MESSAGE"] == "two\nlines")
        #expect(fields["PRIORITY"] == "4")
        #expect(fields["SYSLOG_IDENTIFIER"] == "appd")
        #expect(fields["APPD_APP"] == "com.example.hello")
        #expect(fields["APPD_INSTANCE"] == "0a1b2c")
        #expect(fields["APPD_PID"] == "42")
        #expect(fields["APPD_EXIT_CODE"] == "3")
    }

    @Test(
        "entries go out in order, without the logger waiting for a slow journal; past the bound they are dropped and counted"
    )
    func orderAndBound() throws {
        let captured = Captured()
        let gate = DispatchSemaphore(value: 0)
        let writer = JournalWriter { fields in
            // The first entry waits until every other one is queued: a journald that stalls.
            if captured.all.isEmpty { gate.wait() }
            captured.entries.withLock { $0.append(fields) }
            return 0
        }
        let logger = Logger(label: "appd") { JournalLogHandler(label: $0, writer: writer) }
        let start = Date()
        let total = JournalWriter.maxPending + 100
        for index in 0..<total { logger.info("line \(index)") }
        #expect(Date().timeIntervalSince(start) < 5)
        gate.signal()
        writer.flush()
        let messages = captured.all.compactMap {
            Dictionary($0, uniquingKeysWith: { $1 })["MESSAGE"]
        }
        let lines = messages.filter { $0.hasPrefix("line ") }
        // In order, the first maxPending of them, then one note of what was dropped.
        #expect(lines == (0..<JournalWriter.maxPending).map { "line \($0)" })
        #expect(messages.contains("appd: 100 log entries were dropped (journald too slow)"))
    }

    @Test("without a journal (no socket) sending fails quietly")
    func noJournal() {
        // In this test's mount namespace there may or may not be a journald; either way the
        // call returns (0 or a negative errno) instead of trapping or blocking.
        let result = JournalWriter.sendv([
            ("MESSAGE", "appd test entry"), ("SYSLOG_IDENTIFIER", "appd-test"),
        ])
        #expect(result <= 0)
    }

    @Test("the journal is used only when JOURNAL_STREAM names the stream stderr is")
    func journalStream() {
        var info = stat()
        fstat(2, &info)
        #expect(
            JournalLogHandler.stderrIsJournal(["JOURNAL_STREAM": "\(info.st_dev):\(info.st_ino)"]))
        #expect(
            !JournalLogHandler.stderrIsJournal([
                "JOURNAL_STREAM": "\(info.st_dev):\(info.st_ino + 1)"
            ]))
        #expect(!JournalLogHandler.stderrIsJournal([:]))
    }
}
