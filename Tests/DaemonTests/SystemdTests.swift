import AppdAPI
import AppdClient
import Foundation
import Testing

/// appd serve as systemd starts it: these tests play systemd's side of the notification
/// protocol (a datagram socket named by $NOTIFY_SOCKET) and read what the daemon says.
@Suite("appd serve under systemd's notification protocol", .serialized, rootOnly)
struct SystemdTests {
    @Test(
        "READY=1 once it answers, STATUS with the running count, WATCHDOG=1 at half of WATCHDOG_USEC, STOPPING=1 on SIGTERM"
    )
    func notifications() throws {
        let listener = try NotifyListener()
        // 200 ms: pings every 100 ms.
        let daemon = try TestDaemon(environment: [
            "NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": "200000",
        ])
        let ready = try #require(listener.next { $0.contains("READY=1") })
        #expect(ready.contains("STATUS=serving on \(daemon.socket); 0 running instance(s)"))

        // Pings keep coming: at least 5 in a second.
        let start = Date()
        var pings = 0
        while Date().timeIntervalSince(start) < 1.2, pings < 5 {
            if listener.next(timeout: 1.2, { $0 == "WATCHDOG=1" }) != nil { pings += 1 }
        }
        #expect(pings == 5)

        try daemon.installProbe("com.example.notified")
        let instance = try daemon.launch("com.example.notified", ["sleep", "120"])
        #expect(
            listener.next { $0 == "STATUS=serving on \(daemon.socket); 1 running instance(s)" }
                != nil)
        // The app does not inherit the daemon's line to systemd.
        let pid = try #require(instance.pid)
        let environ =
            (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ"))) ?? Data()
        #expect(!String(decoding: environ, as: UTF8.self).contains("NOTIFY_SOCKET"))
        _ = try daemon.client.post("/v1/instances/\(instance.id)/kill", as: APIInstance.self)
        #expect(
            listener.next { $0 == "STATUS=serving on \(daemon.socket); 0 running instance(s)" }
                != nil)

        daemon.stop()
        let stopping = listener.next { $0.contains("STOPPING=1") }
        #expect(
            stopping?.contains("STATUS=stopping; 0 running instance(s) keep running") == true,
            "\(listener.all.filter { $0 != "WATCHDOG=1" })")
    }

    @Test("without WATCHDOG_USEC, or with a WATCHDOG_PID that is not appd's, no pings")
    func noWatchdog() throws {
        let listener = try NotifyListener()
        let daemon = try TestDaemon(environment: [
            "NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1",
        ])
        #expect(listener.next { $0.contains("READY=1") } != nil)
        #expect(listener.next(timeout: 0.5) { $0 == "WATCHDOG=1" } == nil)
        daemon.stop()
    }

    @Test(
        "each line an app prints reaches the journal once, with its app, instance and pid, also across a daemon crash"
    )
    func outputToJournal() throws {
        // journald's side: a datagram socket reading the native protocol.
        let journal = try NotifyListener()
        let daemon = try TestDaemon(arguments: ["--journal-socket", journal.path])
        try daemon.installProbe("com.example.journaled")
        // 300 lines at once (more than the socket's queue of 10 holds), then 3 s of quiet.
        let chatty = try daemon.launch("com.example.journaled", ["chatter", "300"])
        let fields = { (entry: String) -> [String: String] in
            Dictionary(
                entry.split(separator: "\n").compactMap { line in
                    line.firstIndex(of: "=").map {
                        (String(line[..<$0]), String(line[line.index(after: $0)...]))
                    }
                }, uniquingKeysWith: { $1 })
        }
        let first = try #require(journal.next { $0.contains("MESSAGE=chatter line 0000000 ") })
        #expect(fields(first)["APPD_APP"] == "com.example.journaled")
        #expect(fields(first)["SYSLOG_IDENTIFIER"] == "com.example.journaled")
        #expect(fields(first)["APPD_INSTANCE"] == chatty.id)
        #expect(fields(first)["APPD_PID"] == chatty.pid.map(String.init))
        #expect(fields(first)["PRIORITY"] == "6")
        #expect(journal.next { $0.contains("MESSAGE=chatter line 0000299 ") } != nil)

        // The daemon dies and comes back while the app runs: it resumes where it was, so no
        // line comes twice; and what an app prints after the restart arrives.
        daemon.crash()
        try daemon.start()
        _ = try daemon.wait(chatty.id)
        let later = try daemon.launch("com.example.journaled", ["chatter", "5"])
        #expect(
            journal.next { $0.contains("MESSAGE=chatter line 0000004 ") && $0.contains(later.id) }
                != nil)
        let mine = journal.all.filter { fields($0)["APPD_INSTANCE"] == chatty.id }.compactMap {
            fields($0)["MESSAGE"]
        }
        #expect(mine.count == 300)
        #expect(
            mine
                == (0..<300).map {
                    String(format: "chatter line %07d ", $0) + String(repeating: ".", count: 80)
                })
        _ = try daemon.wait(later.id)
        daemon.stop()
    }
}

/// A bound datagram socket, as systemd's notify socket or journald's, read by a thread of its
/// own as systemd reads it (promptly: the queue of a datagram socket holds only 10 messages, and
/// appd drops what does not fit rather than wait). With `reading: false` it reads nothing until
/// `startReading()`: its queue fills after a few datagrams, as journald's does when it falls
/// behind.
final class NotifyListener: @unchecked Sendable {
    let path: String
    private let inbox: Inbox
    private var started = false
    private var consumed = 0

    /// What the reader thread holds: never the listener, so the listener's deinit runs as soon
    /// as the test lets go of it and removes the socket file. (A thread holding the listener
    /// kept deinit from ever running: each test left its socket in /tmp and a thread polling.)
    private final class Inbox: @unchecked Sendable {
        let fd: Int32
        let lock = NSLock()
        var received: [String] = []
        var closed = false

        init(fd: Int32) { self.fd = fd }

        func read() {
            var buffer = [UInt8](repeating: 0, count: 65536)
            while !lock.withLock({ closed }) {
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 100) == 1 else { continue }
                let count = recv(fd, &buffer, buffer.count, 0)
                guard count > 0 else { continue }
                let message = String(decoding: buffer[0..<count], as: UTF8.self)
                lock.withLock { received.append(message) }
            }
            Glibc.close(fd)
        }
    }

    init(path: String? = nil, reading: Bool = true) throws {
        self.path = path ?? "/tmp/appd-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        guard let address = UnixAddress(self.path) else { throw POSIXError(.ENAMETOOLONG) }
        inbox = Inbox(fd: try boundUnixSocket(SOCK_DGRAM, address))
        if reading { startReading() }
    }

    func startReading() {
        guard !started else { return }
        started = true
        Thread.detachNewThread { [inbox] in inbox.read() }
    }

    var all: [String] { inbox.lock.withLock { inbox.received } }

    /// The next message that `matches`, skipping others; nil after `timeout` seconds.
    func next(timeout: Double = 20, _ matches: (String) -> Bool) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            let pending: [String] = inbox.lock.withLock {
                defer { consumed = inbox.received.count }
                return Array(inbox.received[consumed...])
            }
            if let index = pending.firstIndex(where: matches) {
                // Messages after the match stay unread for the next call.
                inbox.lock.withLock { consumed -= pending.count - index - 1 }
                return pending[index]
            }
            usleep(10_000)
        } while Date() < deadline
        return nil
    }

    /// The reader closes the fd within one poll; one never started, here.
    deinit {
        unlink(path)
        inbox.lock.withLock { inbox.closed = true }
        if !started { Glibc.close(inbox.fd) }
    }
}
