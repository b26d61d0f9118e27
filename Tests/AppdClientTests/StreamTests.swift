import AppdAPI
import AppdBase
import AppdClient
import Foundation
import Testing

@Suite("AppdClient streams and uploads")
struct StreamTests {
    @Test("a chunked stream reaches the callback chunk by chunk, before the stream ends")
    func streamingCallbacks() throws {
        // The server sends the next chunk only once the client has seen the previous one: a
        // client that waited for the end of the body would hang here (and time out).
        let seen = DispatchSemaphore(value: 0)
        let server = try CannedServer { connection in
            connection.write(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n")
            for piece in ["first\n", "second\n", "third\n"] {
                connection.write(String(piece.utf8.count, radix: 16) + "\r\n" + piece + "\r\n")
                if seen.wait(timeout: .now() + 5) == .timedOut { return }
            }
            connection.write("0\r\n\r\n")
        }
        var received: [String] = []
        var client = AppdClient(socketPath: server.socketPath)
        client.timeout = 10
        try client.stream(
            AppdClient.path("instances", "0123456789ab", "logs", query: ["follow": "1"])
        ) { bytes in
            received.append(String(decoding: bytes, as: UTF8.self))
            seen.signal()
        }
        #expect(received == ["first\n", "second\n", "third\n"])
        #expect(
            server.finish().first?.line == "GET /v1/instances/0123456789ab/logs?follow=1 HTTP/1.1")
    }

    @Test(
        "streamLines gives whole lines, however the chunks cut them, and a last line without newline"
    )
    func lines() throws {
        let server = try CannedServer { connection in
            connection.write(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/x-ndjson\r\n\r\n"
            )
            connection.write(chunked(["{\"seq\":1}\n{\"se", "q\":2}\r\n", "\n", "{\"seq\":3}"]))
        }
        var lines: [String] = []
        try AppdClient(socketPath: server.socketPath).streamLines(AppdClient.path("events")) {
            line in
            lines.append(String(decoding: line, as: UTF8.self))
        }
        #expect(lines == [#"{"seq":1}"#, #"{"seq":2}"#, "", #"{"seq":3}"#])
        #expect(server.finish().first?.header("Accept") == "application/x-ndjson")
    }

    @Test("a stream answered with an error throws the daemon's AppdError")
    func streamError() throws {
        let server = try CannedServer { connection in
            connection.respond(
                "404 Not Found",
                json(APIErrorBody(AppdError(.notFound, "no instance 0123456789ab"))))
        }
        #expect(throws: AppdError(.notFound, "no instance 0123456789ab")) {
            try AppdClient(socketPath: server.socketPath).stream(
                AppdClient.path("instances", "0123456789ab", "logs")
            ) { _ in
                Issue.record("an error body must not reach the callback")
            }
        }
        server.stop()
    }

    @Test("a streamed upload arrives intact, chunked, with its content type")
    func upload() throws {
        let words = (0..<375_000).map { _ in UInt64.random(in: .min ... .max) }
        let payload = words.withUnsafeBytes { [UInt8]($0) }
        let server = try CannedServer { connection in
            let body = connection.readBody()
            connection.respond("201 Created", #"{"arguments": ["\#(body.count)"]}"#)
        }
        let answer = try AppdClient(socketPath: server.socketPath).upload(
            AppdClient.path("apps", query: ["name": "Hello.app"]), contentType: "application/x-tar",
            as: LaunchRequest.self
        ) { write in
            // Irregular pieces, as a tar writer produces them: headers, file data, padding.
            var offset = 0
            var size = 1
            while offset < payload.count {
                let end = min(payload.count, offset + size)
                try payload[offset..<end].withUnsafeBytes { try write($0) }
                offset = end
                size = size * 7 % 300_007 + 1
            }
        }
        #expect(answer.arguments == ["\(payload.count)"])
        let request = try #require(server.finish().first)
        #expect(request.line == "POST /v1/apps?name=Hello.app HTTP/1.1")
        #expect(request.header("Transfer-Encoding") == "chunked")
        #expect(request.header("Content-Type") == "application/x-tar")
        #expect(request.header("Content-Length") == nil)
        #expect(request.complete)
        #expect(request.body == Data(payload))
    }

    struct ReadFailure: Error, Equatable {}

    @Test("a producer that fails aborts the upload: its error passes through, the body never ends")
    func producerFails() throws {
        let server = try CannedServer { connection in
            connection.readBody()
            connection.respond("201 Created", "{}")
        }
        #expect(throws: ReadFailure()) {
            try AppdClient(socketPath: server.socketPath).upload(
                AppdClient.path("apps"), contentType: "application/x-tar", as: LaunchRequest.self
            ) { write in
                try Array(repeating: UInt8(7), count: 1000).withUnsafeBytes { try write($0) }
                throw ReadFailure()
            }
        }
        let request = try #require(server.finish().first)
        #expect(!request.complete)
    }

    @Test("a daemon that refuses an upload early and closes is heard: its error is thrown")
    func refusedUpload() throws {
        let refusal = AppdError(.tooLarge, "the archive is larger than MaxTotalBytes (1 MiB)")
        let server = try CannedServer { connection in
            connection.respond("413 Content Too Large", json(APIErrorBody(refusal)))
            // Closing with the upload unread: the client's next write fails with EPIPE.
        }
        let chunk = [UInt8](repeating: 1, count: 1 << 20)
        #expect(throws: refusal) {
            try AppdClient(socketPath: server.socketPath).upload(
                AppdClient.path("apps"), contentType: "application/x-tar", as: LaunchRequest.self
            ) { write in
                for _ in 0..<64 { try chunk.withUnsafeBytes { try write($0) } }
            }
        }
        server.stop()
    }
}
