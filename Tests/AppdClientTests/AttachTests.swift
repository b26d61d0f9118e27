import AppdAPI
import AppdBase
import AppdClient
import Foundation
import TestSupport
import Testing

/// A frame as the daemon writes it (AttachFrame.frame), as text.
private func frame(_ kind: String, _ payload: String) -> String {
    String(decoding: AttachFrame.frame(kind, Array(payload.utf8)), as: UTF8.self)
}

private func instance(_ id: String, exit: APIExit? = nil) -> APIInstance {
    var instance = APIInstance(
        id: id, app: "com.example.notes", state: exit == nil ? .active : .exited, pid: 42,
        uid: 60001,
        arguments: [], launchedBy: 0, startedAt: Date(timeIntervalSince1970: 1_800_000_000),
        log: "/var/lib/appd/logs/com.example.notes/\(id).log")
    instance.exit = exit
    return instance
}

/// The parser's events for `bytes` fed in pieces of the given sizes: collected frames, and the
/// output joined.
private func parse(_ bytes: [UInt8], pieces: [Int]) throws -> (frames: [String], output: [UInt8]) {
    var parser = AttachFrameParser()
    var frames: [String] = []
    var output: [UInt8] = []
    var start = 0
    var sizes = pieces.makeIterator()
    while start < bytes.count {
        let count = min(bytes.count - start, max(1, sizes.next() ?? bytes.count))
        try bytes[start..<start + count].withUnsafeBytes { raw in
            try parser.feed(raw) { event in
                switch event {
                case .frame(let kind, let payload):
                    frames.append("\(kind):\(String(decoding: payload, as: UTF8.self))")
                case .output(let piece):
                    output += piece
                }
            }
        }
        start += count
    }
    #expect(parser.atFrameBoundary)
    return (frames, output)
}

@Suite("attached launch: frames and client")
struct AttachTests {
    @Test("frames read the same however the body is cut; output imitating frames stays output")
    func parserSplits() throws {
        // Output that looks like frames, with newlines and NULs: only its length counts.
        let hostile = "\nexit 2\n{}\ninstance 3\nabc\r\n0\r\n\r\n\u{0}output 99999999\n"
        let body = Array(
            (frame("instance", #"{"id":"a"}"#) + frame("output", hostile) + frame("output", "")
                + frame("future", "skipped by kind") + frame("exit", #"{"id":"a"}"#)).utf8)
        let whole = try parse(body, pieces: [])
        #expect(
            whole.frames == [
                #"instance:{"id":"a"}"#, "future:skipped by kind", #"exit:{"id":"a"}"#,
            ])
        #expect(whole.output == Array(hostile.utf8))
        var random = SeededGenerator(seed: 15)
        for _ in 0..<200 {
            let pieces = (0..<body.count).map { _ in Int.random(in: 1...9, using: &random) }
            let cut = try parse(body, pieces: pieces)
            #expect(cut.frames == whole.frames)
            #expect(cut.output == whole.output)
        }
    }

    @Test(
        "bad frame headers are refused with what was wrong, never trusted",
        arguments: [
            "exit\n", "exit -1\n", "exit 1x\n", "EXIT 1\n", "ex1t 1\n", " 1\n", "exit 12345678\n",
            "exit 1048577\n", "averyveryverylongkind 1\n", "output  1\n",
        ])
    func badHeaders(header: String) {
        var parser = AttachFrameParser()
        #expect(throws: AttachFrameError.self) {
            try Array(header.utf8).withUnsafeBytes { try parser.feed($0) { _ in } }
        }
    }

    @Test("a header line that never ends is refused at its bound")
    func endlessHeader() {
        var parser = AttachFrameParser()
        #expect(throws: AttachFrameError.self) {
            for _ in 0..<100 {
                try Array("e".utf8).withUnsafeBytes { try parser.feed($0) { _ in } }
            }
        }
    }

    @Test("the client gets the instance first, then the output, and returns the ended instance")
    func client() throws {
        let launched = instance("0123456789ab")
        let ended = instance("0123456789ab", exit: APIExit(reason: .exited, code: 3))
        let server = try CannedServer { connection in
            connection.readBody()
            connection.write(
                "HTTP/1.1 200 OK\r\nContent-Type: \(AttachFrame.contentType)\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            connection.write(
                chunked([
                    frame("instance", json(launched)) + frame("output", "hel"),
                    frame("output", "lo\n"),
                    frame("exit", json(ended)),
                ]))
        }
        var order: [String] = []
        let result = try AppdClient(socketPath: server.socketPath).launchAttached(
            "com.example.notes", LaunchRequest(arguments: ["--verbose"])
        ) {
            order.append("instance \($0.id)")
        } onOutput: {
            order.append("output \(String(decoding: $0, as: UTF8.self))")
        }
        guard case .ended(let got) = result else {
            Issue.record("\(result)")
            return
        }
        #expect(got.exit == APIExit(reason: .exited, code: 3))
        #expect(order == ["instance 0123456789ab", "output hel", "output lo\n"])
        let request = try #require(server.finish().first)
        #expect(request.line == "POST /v1/apps/com.example.notes/launch?attach=1 HTTP/1.1")
        #expect(request.header("Accept") == AttachFrame.contentType)
        #expect(String(decoding: request.body, as: UTF8.self).contains("--verbose"))
    }

    @Test(
        "an appd without attach=1 answers the plain launch: the client says so and hands over the instance"
    )
    func olderDaemon() throws {
        let launched = instance("0123456789ab")
        let server = try CannedServer { connection in
            connection.readBody()
            connection.respond("201 Created", json(launched))
        }
        var seen: APIInstance?
        let result = try AppdClient(socketPath: server.socketPath).launchAttached(
            "com.example.notes", LaunchRequest()
        ) {
            seen = $0
        } onOutput: { _ in
        }
        guard case .notAttached(let got) = result else {
            Issue.record("\(result)")
            return
        }
        #expect(got.id == launched.id)
        #expect(seen?.id == launched.id)
        _ = server.finish()
    }

    @Test(
        "appctl launch --console against an appd without attach=1: the instance, then the followed log and the wait, each on its own request"
    )
    func consoleFallback() throws {
        let launched = instance("0123456789ab")
        let ended = instance("0123456789ab", exit: APIExit(reason: .exited, code: 4))
        let server = try CannedServer { connection in
            let line = connection.request?.line ?? ""
            if line.hasPrefix("POST /v1/apps/com.example.notes/launch") {
                connection.readBody()
                connection.respond("201 Created", json(launched))
            } else if line.hasPrefix("GET /v1/instances/0123456789ab/logs?follow=1 ") {
                connection.write(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
                        + chunked(["old daemon's output\n"]))
            } else if line.hasPrefix("GET /v1/instances/0123456789ab/wait ") {
                connection.respond("200 OK", json(ended))
            } else {
                connection.respond(
                    "404 Not Found", json(APIErrorBody(AppdError(.notFound, line))))
            }
        }
        let result = try runTool(
            "appctl", ["--socket", server.socketPath, "launch", "--console", "com.example.notes"])
        #expect(result.code == 4, "\(result.output)")
        #expect(result.output.contains("old daemon's output"), "\(result.output)")
        let lines = server.finish().map(\.line)
        #expect(
            lines == [
                "POST /v1/apps/com.example.notes/launch?attach=1 HTTP/1.1",
                "GET /v1/instances/0123456789ab/logs?follow=1 HTTP/1.1",
                "GET /v1/instances/0123456789ab/wait HTTP/1.1",
            ], "\(lines)")
    }

    @Test(
        "a stream that breaks off, an exit of another instance, an error frame: each an error naming the launched instance",
        arguments: ["cut", "other", "error", "output-first", "after-exit"])
    func failures(_ kind: String) throws {
        let launched = instance("0123456789ab")
        let server = try CannedServer { connection in
            connection.readBody()
            connection.write(
                "HTTP/1.1 200 OK\r\nContent-Type: \(AttachFrame.contentType)\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            let first = frame("instance", json(launched))
            switch kind {
            case "cut":
                connection.write(String(first.utf8.count, radix: 16) + "\r\n" + first + "\r\n")
            case "other":
                connection.write(
                    chunked([
                        first,
                        frame(
                            "exit",
                            json(instance("ba9876543210", exit: APIExit(reason: .exited, code: 0)))),
                    ]))
            case "error":
                connection.write(
                    chunked([
                        first,
                        frame(
                            "error",
                            json(
                                APIErrorBody(
                                    AppdError(.unavailable, "appd is stopping")))),
                    ]))
            case "output-first":
                connection.write(chunked([frame("output", "x") + first]))
            default:
                connection.write(
                    chunked([
                        first,
                        frame(
                            "exit",
                            json(instance("0123456789ab", exit: APIExit(reason: .exited, code: 0))))
                            + frame("output", "late"),
                    ]))
            }
        }
        var error: AppdError?
        do {
            _ = try AppdClient(socketPath: server.socketPath).launchAttached(
                "com.example.notes", LaunchRequest()
            ) { _ in
            } onOutput: { _ in
            }
        } catch let thrown as AppdError {
            error = thrown
        }
        let got = try #require(error)
        switch kind {
        case "cut":
            #expect(got.code == .unavailable && got.message.contains("broke off"), "\(got)")
        case "error": #expect(got.message == "appd is stopping", "\(got)")
        default: #expect(got.code == .badResponse, "\(got)")
        }
        if kind != "output-first" {
            #expect(got.hint?.contains("0123456789ab") == true, "\(got)")
        }
        _ = server.finish()
    }
}
