import AppdAPI
import AppdBase
import AppdClient
import Foundation
import Testing

@Suite("AppdClient when the daemon is not there or misbehaves")
struct FailureTests {
    func failure(_ client: AppdClient, _ path: String = AppdClient.path("apps")) -> AppdError? {
        #expect(throws: AppdError.self) { try client.get(path, as: [APIApp].self) }
    }

    @Test("no socket file: unavailable, 'appd is not running', how to start it")
    func noSocket() throws {
        let scratch = Scratch("appd-client")
        let path = scratch.sub("appd.sock")
        let error = try #require(failure(AppdClient(socketPath: path)))
        #expect(error.code == .unavailable)
        #expect(error.message == "appd is not running (no daemon listening on \(path))")
        #expect(error.hint == "start it: systemctl start appd.socket, or appd serve --root DIR")
        #expect(error.errno == ENOENT)
    }

    @Test(
        "the hint says where the path came from: --socket, APPD_SOCKET, a root's record, a root's default"
    )
    func pathSource() throws {
        let scratch = Scratch("appd-client")
        let root = scratch.sub("root")
        let gone = scratch.sub("gone.sock")
        func hint(socket: String? = nil, root: String? = nil, _ environment: [String: String] = [:])
            throws -> (String, String?)
        {
            let client = AppdClient(socket: socket, root: root, environment: environment)
            let error = try #require(failure(client))
            return (client.socketPath, error.hint)
        }
        let flag = try hint(socket: gone, root: root, ["APPD_SOCKET": "/elsewhere.sock"])
        #expect(flag.0 == gone)
        #expect(flag.1?.hasPrefix("the path is the one --socket gave") == true, "\(flag.1 ?? "")")
        let environment = try hint(root: root, ["APPD_SOCKET": gone])
        #expect(environment.0 == gone)
        #expect(
            environment.1?.hasPrefix(
                "the path is APPD_SOCKET's: if that daemon is gone, unset APPD_SOCKET") == true)
        let unrecorded = try hint(["APPD_ROOT": root])
        #expect(unrecorded.0 == "\(root)/run/appd.sock")
        #expect(
            unrecorded.1?.hasPrefix(
                "the path is the default of \(root) (from APPD_ROOT): no daemon of it recorded another in \(root)/run/appd.socket-path"
            ) == true,
            "\(unrecorded.1 ?? "")")

        try FileManager.default.createDirectory(
            atPath: "\(root)/run", withIntermediateDirectories: true)
        try "\(gone)\n".write(
            toFile: "\(root)/run/appd.socket-path", atomically: true, encoding: .utf8)
        let recorded = try hint(root: root)
        #expect(recorded.0 == gone)
        #expect(
            recorded.1?.contains(
                "recorded in \(root)/run/appd.socket-path when it started: it is not running any more"
            ) == true)
        // A record that is not one absolute path is ignored, as if absent.
        for bad in ["relative.sock\n", "/a\n/b\n", String(repeating: "/x", count: 3000)] {
            try bad.write(toFile: "\(root)/run/appd.socket-path", atomically: true, encoding: .utf8)
            #expect(try hint(root: root).0 == "\(root)/run/appd.sock", "\(bad.prefix(20))")
        }
    }

    @Test("a socket file nobody listens on (a daemon that died): the same")
    func staleSocket() throws {
        let scratch = Scratch("appd-client")
        let path = scratch.sub("appd.sock")
        close(try boundSocket(at: path))
        #expect(FileManager.default.fileExists(atPath: path))
        let error = try #require(failure(AppdClient(socketPath: path)))
        #expect(error.code == .unavailable)
        #expect(error.message == "appd is not running (no daemon listening on \(path))")
        #expect(error.errno == ECONNREFUSED)
    }

    @Test(
        "a socket the caller may not open names its group",
        .enabled(if: geteuid() != 0, "root opens any socket"))
    func permissionDenied() throws {
        let server = try CannedServer { _ in }
        defer { server.stop() }
        chmod(server.socketPath, 0)
        let error = try #require(failure(AppdClient(socketPath: server.socketPath)))
        #expect(error.code == .unavailable)
        #expect(
            error.message.hasPrefix("permission denied on the socket \(server.socketPath) (group "))
        #expect(error.message.hasSuffix("you need to be in the group that owns it"))
    }

    @Test("a socket path longer than sun_path is refused with the limit")
    func longPath() throws {
        let path = "/tmp/" + String(repeating: "x", count: 120)
        let error = try #require(failure(AppdClient(socketPath: path)))
        #expect(error.code == .unavailable)
        #expect(
            error.message.contains("is too long (125 bytes; a Unix socket path holds at most 107)"))
    }

    @Test("a daemon that closes without answering: unavailable")
    func noAnswer() throws {
        let server = try CannedServer { _ in }
        let error = try #require(failure(AppdClient(socketPath: server.socketPath)))
        #expect(error.code == .unavailable)
        #expect(error.message == "appd closed the connection without answering GET /v1/apps")
        server.stop()
    }

    @Test("an answer cut short of its Content-Length: unavailable, says so")
    func truncated() throws {
        let server = try CannedServer { connection in
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n[{\"bundleId\"")
        }
        let error = try #require(failure(AppdClient(socketPath: server.socketPath)))
        #expect(error.code == .unavailable)
        #expect(
            error.message
                == "appd's answer to GET /v1/apps broke off: the connection closed 88 bytes before the end of the body"
        )
        server.stop()
    }

    @Test(
        "something that is not HTTP on the socket: badResponse",
        arguments: [
            (
                "SSH-2.0-OpenSSH_9.2\r\n\r\n",
                "the status line 'SSH-2.0-OpenSSH_9.2' is not HTTP/1.x"
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n[]",
                "bad Content-Length '2, 3'"
            ),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size 'zz'"),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n[]]\r\n0\r\n\r\n",
                "a chunk is longer than its size line says"
            ),
            (
                "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
                "the header line 'no colon here' has no name"
            ),
        ])
    func malformed(answer: String, problem: String) throws {
        let server = try CannedServer { connection in connection.write(answer) }
        let error = try #require(failure(AppdClient(socketPath: server.socketPath)))
        #expect(error.code == .badResponse)
        #expect(error.message == "the answer to GET /v1/apps is not valid HTTP: \(problem)")
        server.stop()
    }

    @Test("headers past the limit are refused, not buffered without end")
    func hugeHead() throws {
        let server = try CannedServer { connection in
            connection.write("HTTP/1.1 200 OK\r\n")
            for index in 0..<2000 {
                connection.write("X-Filler-\(index): \(String(repeating: "y", count: 60))\r\n")
            }
            connection.write("\r\n")
        }
        let error = try #require(failure(AppdClient(socketPath: server.socketPath)))
        #expect(error.code == .tooLarge, "\(error)")
        server.stop()
    }

    @Test("a Content-Length above the answer limit is refused before reading it")
    func bigAnswer() throws {
        let server = try CannedServer { connection in
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n[]")
        }
        var client = AppdClient(socketPath: server.socketPath)
        client.maxResponseBytes = 1000
        let error = try #require(failure(client))
        #expect(error.code == .tooLarge)
        #expect(
            error.message.hasSuffix("its Content-Length is 999999999999, the limit is 1000 bytes"))
        server.stop()
    }

    @Test("interim 1xx answers are skipped; an answer without length ends with the connection")
    func interimAndUntilClose() throws {
        let server = try CannedServer { connection in
            connection.write("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n[]")
        }
        #expect(
            try AppdClient(socketPath: server.socketPath).get(
                AppdClient.path("apps"), as: [APIApp].self) == [])
        server.stop()
    }

    @Test("with a timeout, a daemon that never answers is unavailable, not a hang")
    func timeout() throws {
        let release = DispatchSemaphore(value: 0)
        let server = try CannedServer { _ in _ = release.wait(timeout: .now() + 10) }
        let error = try #require(failure(AppdClient(socketPath: server.socketPath, timeout: 0.2)))
        #expect(error.code == .unavailable)
        #expect(error.message == "appd did not answer GET /v1/apps within 0.2 s")
        release.signal()
        server.stop()
    }
}
