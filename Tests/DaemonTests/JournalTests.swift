import AppdAPI
import AppdClient
import Foundation
import Testing

/// appd's own log entries, written by libsystemd (sd_journal_sendv) to the journal's fixed
/// socket /run/systemd/journal/socket: the daemon runs in a mount namespace of its own where
/// that folder is the test's, and its stderr is "the journal" ($JOURNAL_STREAM names it).
@Suite("appd's own log entries in the journal, through libsystemd", .serialized, rootOnly)
struct JournalTests {
    @Test(
        "each entry has MESSAGE, PRIORITY, SYSLOG_IDENTIFIER=appd and APPD_APP/INSTANCE/PID fields, in order, the last one before exit"
    )
    func ownEntries() throws {
        var template = Array("/tmp/appd-journal-test.XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw POSIXError(.EIO)
        }
        let folder = String(
            decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let journal = try NotifyListener(path: "\(folder)/socket")
        let script = """
            folder=$1; shift
            mount -t tmpfs -o mode=0755 tmpfs /run/systemd && mkdir /run/systemd/journal \
              && mount --bind "$folder" /run/systemd/journal || exit 111
            JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/2) || exit 112
            export JOURNAL_STREAM
            exec "$@"
            """
        let daemon = try TestDaemon(wrapper: [
            "/usr/bin/unshare", "--mount", "--propagation", "private", "--",
            "/bin/sh", "-c", script, "sh", folder,
        ])
        let fields = { (entry: String) -> [String: String] in
            Dictionary(
                entry.split(separator: "\n").compactMap { line in
                    line.firstIndex(of: "=").map {
                        (String(line[..<$0]), String(line[line.index(after: $0)...]))
                    }
                }, uniquingKeysWith: { $1 })
        }
        let serving = try #require(
            journal.next { $0.contains("MESSAGE=appd \(AppdVersion.current) serving") })
        #expect(fields(serving)["SYSLOG_IDENTIFIER"] == "appd")
        #expect(fields(serving)["PRIORITY"] == "6")
        #expect(fields(serving)["CODE_FUNC"] != nil)
        // Nothing went to stderr: the journal has it.
        #expect(!daemon.serveLog.contains("serving"), "\(daemon.serveLog)")

        try daemon.installProbe("com.example.journal")
        let instance = try daemon.launch("com.example.journal", ["exit", "3"])
        _ = try daemon.wait(instance.id)
        let launched = try #require(
            journal.next {
                fields($0)["MESSAGE"] == "launched com.example.journal as instance \(instance.id)"
            })
        #expect(fields(launched)["APPD_APP"] == "com.example.journal")
        #expect(fields(launched)["APPD_INSTANCE"] == instance.id)
        #expect(fields(launched)["APPD_PID"] == instance.pid.map(String.init))
        let ended = try #require(
            journal.next {
                fields($0)["MESSAGE"]?.hasPrefix(
                    "com.example.journal instance \(instance.id) ended") == true
            })
        #expect(fields(ended)["APPD_INSTANCE"] == instance.id)

        // A denial (docs/denials.md): a warning with what was refused, by whom, where.
        let denied = try daemon.launch("com.example.journal", ["denials"])
        _ = try daemon.wait(denied.id)
        // In the order the probe tried them.
        let listing = try #require(
            journal.next {
                fields($0)["APPD_RIGHT"] == "fs.read_dir"
                    && fields($0)["APPD_INSTANCE"] == denied.id
            },
            "\(journal.all.suffix(8).compactMap { fields($0)["MESSAGE"] })")
        #expect(fields(listing)["APPD_PATH"] == "/")
        #expect(fields(listing)["APPD_SOURCE"] == "landlock")
        let mount = try #require(
            journal.next(timeout: 5) {
                fields($0)["APPD_RIGHT"] == "mount" && fields($0)["APPD_INSTANCE"] == denied.id
            })
        #expect(fields(mount)["APPD_APP"] == "com.example.journal")
        #expect(fields(mount)["APPD_SOURCE"] == "seccomp")
        #expect(fields(mount)["APPD_SYSCALL"] == "mount")
        #expect(fields(mount)["PRIORITY"] == "4")
        #expect(
            fields(mount)["MESSAGE"]?.hasPrefix(
                "com.example.journal instance \(denied.id) denied by seccomp: mount") == true)

        daemon.stop()
        let stopping = journal.next(timeout: 5) {
            fields($0)["MESSAGE"]?.hasPrefix("stopping: ") == true
        }
        #expect(stopping != nil, "\(journal.all.compactMap { fields($0)["MESSAGE"] })")
    }
}
