import AppdAPI
import Foundation
import Testing

@Suite("appctl logs -n: the last lines first", .serialized, rootOnly)
struct LogTailTests {
    /// Each chatter line is 100 bytes: 1,000 lines pass a 32 KiB log's rotation three times.
    static let logMax = 32 << 10

    @Test(
        "appctl logs APPID takes the newest running instance, not a newer one that exited; with none running, the newest"
    )
    func runningInstanceFirst() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.server")
        let server = try daemon.launch("com.example.server", ["ignore-term", "60"])
        #expect(
            daemon.eventually {
                (try? daemon.logs(server.id))?.contains("ignore-term: value ready") == true
            })
        let tool = try daemon.launch("com.example.server", ["env"])
        _ = try daemon.wait(tool.id)
        let running = try daemon.run("appctl", ["logs", "com.example.server"])
        #expect(running.code == 0, "\(running.output)")
        #expect(running.output == "ignore-term: value ready\n", "\(running.output)")

        _ = try daemon.client.post("/v1/instances/\(server.id)/kill", as: APIInstance.self)
        _ = try daemon.wait(server.id)
        let newest = try daemon.run("appctl", ["logs", "com.example.server"])
        #expect(newest.output.contains("env: value HOME="), "\(newest.output)")
    }

    @Test(
        "-n N prints exactly the last N lines, across the rotated file too; -n 0 nothing; a bad N is refused"
    )
    func lastLines() throws {
        let daemon = try TestDaemon(config: "LogMaxBytes=\(Self.logMax)\n")
        try daemon.installProbe("com.example.tail")
        let instance = try daemon.launch("com.example.tail", ["chatter", "1000"])
        _ = try daemon.wait(instance.id)
        let expected = (0..<1000).map {
            String(format: "chatter line %07d ", $0) + String(repeating: ".", count: 80)
        }
        // What the log's two files still hold: a tail of the 1,000 lines.
        let all = try daemon.run("appctl", ["logs", instance.id]).output.split(separator: "\n").map(
            String.init)
        #expect(all.count > 300 && Array(expected.suffix(all.count)) == all, "\(all.count) lines")
        for count in [1, 5, 200, all.count - 1] {
            let result = try daemon.run("appctl", ["logs", "-n", "\(count)", instance.id])
            #expect(result.code == 0, "\(result.output)")
            #expect(
                result.output.split(separator: "\n").map(String.init)
                    == Array(expected.suffix(count)), "-n \(count)")
        }
        // More than the log holds: all of it.
        #expect(
            try daemon.run("appctl", ["logs", "-n", "5000", instance.id]).output.split(
                separator: "\n"
            ).count == all.count)
        #expect(try daemon.run("appctl", ["logs", "-n", "0", instance.id]).output.isEmpty)
        let bad = try daemon.run("appctl", ["logs", "-n", "200000", instance.id])
        #expect(bad.code != 0)
        #expect(bad.output.contains("-n takes a number of lines from 0 to 100000"), "\(bad.output)")
        do {
            _ = try daemon.client.get(
                "/v1/instances/\(instance.id)/logs?tail=lots", as: [String].self)
            Issue.record("tail=lots was accepted")
        } catch {
            #expect(error.code == .badRequest && error.message.contains("tail 'lots'"), "\(error)")
        }
    }

    @Test("-n with -f: the last lines, then it follows until the app exits")
    func tailThenFollow() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.tailf")
        // The probe prints its 30 lines, then stays 3 s: the follower starts once they are in
        // the log, takes the last 2, and ends when the app does.
        let instance = try daemon.launch("com.example.tailf", ["chatter", "30"])
        #expect(
            try daemon.eventually { try daemon.logs(instance.id).contains("chatter line 0000029") })
        let followed = try daemon.run("appctl", ["logs", "-n", "2", "-f", instance.id])
        let lines = followed.output.split(separator: "\n").map(String.init)
        #expect(followed.code == 0)
        #expect(
            lines.count == 2 && lines.first?.hasPrefix("chatter line 0000028") == true, "\(lines)")
        #expect(
            try daemon.instance(instance.id).state == .exited, "-f returned before the app ended")
    }

    @Test(
        "an answer larger than the socket's buffer reaches a client that reads slowly, to its last chunk, before the connection closes"
    )
    func slowReaderGetsEverything() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.slowreader")
        let instance = try daemon.launch("com.example.slowreader", ["chatter", "5000"])
        _ = try daemon.wait(instance.id)
        // 500 KB of log, asked for on a connection that closes after the answer, with a small
        // receive buffer, read only once the daemon has written all it could and returned.
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        var small: Int32 = 4096
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) {
            $0.copyBytes(from: Array(daemon.socket.utf8) + [0])
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        try #require(connected == 0)
        let request = Array(
            "GET /v1/instances/\(instance.id)/logs HTTP/1.1\r\nHost: appd\r\nConnection: close\r\n\r\n"
                .utf8)
        #expect(send(fd, request, request.count, 0) == request.count)
        usleep(500_000)
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { break }
            answer += buffer[..<count]
        }
        let text = String(decoding: answer, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 200"))
        #expect(text.hasSuffix("\r\n0\r\n\r\n"), "the answer broke off after \(answer.count) bytes")
        #expect(Self.dechunked(text).split(separator: "\n").count == 5000)
    }

    /// The body of a chunked answer (the test's own reading of it; malformed: what came before).
    static func dechunked(_ answer: String) -> String {
        guard let start = answer.range(of: "\r\n\r\n") else { return "" }
        var rest = Substring(answer[start.upperBound...])
        var body = ""
        while let line = rest.range(of: "\r\n"),
            let size = Int(rest[..<line.lowerBound], radix: 16), size > 0
        {
            let chunk = rest[line.upperBound...].utf8.prefix(size)
            body += String(decoding: chunk, as: UTF8.self)
            rest = Substring(
                String(decoding: rest[line.upperBound...].utf8.dropFirst(size + 2), as: UTF8.self))
        }
        return body
    }
}
