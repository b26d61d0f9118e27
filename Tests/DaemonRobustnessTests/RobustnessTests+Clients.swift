import Foundation
import Glibc
import Testing

/// Clients that are slow, idle, or that keep their connection: the idle timeout
/// (`--idle-timeout`, 3 s here) drops the slow ones and nobody else waits for them.
extension DaemonRobustnessTests {
    static let versionRequest = "GET /v1/version HTTP/1.1\r\nHost: x\r\n\r\n"

    @Test(
        "slow clients (a partial request head, then nothing) are dropped after the idle timeout while others are served"
    )
    func slowloris() throws {
        let baseline = try daemon.settledFDBaseline()
        let slow = try (0..<50).map { _ in try daemon.connect() }
        for wire in slow { wire.send("GET /v1/version HTTP/1.1\r\nHost: x\r\nX-Slow: ") }
        let start = Date()
        while daemon.openFDCount() < baseline + 50 && Date().timeIntervalSince(start) < 1 {
            usleep(10_000)
        }
        #expect(daemon.openFDCount() >= baseline + 50, "the slow connections are not open")
        for _ in 0..<10 {
            let asked = Date()
            daemon.expectServing()
            #expect(Date().timeIntervalSince(asked) < 1, "a fast client waited for the slow ones")
        }
        for wire in slow {
            let exchange = wire.readToEnd(timeout: TestDaemon.idleTimeout + 5)
            #expect(exchange.closed)
            #expect(try HTTPResponse.parseAll(exchange.bytes).allSatisfy { $0.status == 400 })
        }
        let elapsed = Date().timeIntervalSince(start)
        #expect(
            elapsed > TestDaemon.idleTimeout - 0.5 && elapsed < TestDaemon.idleTimeout + 2,
            "dropped after \(elapsed) s")
        #expect(daemon.fdCount(settlingTo: baseline) <= baseline)
        daemon.expectServing()
    }

    @Test(
        "a client trickling its request head a byte at a time is dropped at the idle timeout all the same"
    )
    func trickle() throws {
        let wire = try daemon.connect()
        let head = Array(
            "GET /v1/version HTTP/1.1\r\nHost: x\r\nX-Trickle: \(String(repeating: "t", count: 200))"
                .utf8)
        let start = Date()
        var closed = false
        for byte in head
        where !closed && Date().timeIntervalSince(start) < TestDaemon.idleTimeout + 3 {
            closed = !wire.send([byte]) || wire.readToEnd(timeout: 0.2).closed
        }
        let elapsed = Date().timeIntervalSince(start)
        #expect(closed, "the daemon waited \(elapsed) s for a head that never ends")
        #expect(elapsed < TestDaemon.idleTimeout + 2)
        daemon.expectServing()
    }

    @Test("an idle kept-alive connection is closed after the idle timeout")
    func idleKeepAlive() throws {
        let wire = try daemon.connect()
        wire.send(Self.versionRequest)
        let response = try #require(try wire.readResponse(timeout: 5))
        #expect(response.status == 200 && response.headers["connection"] == "keep-alive")
        let start = Date()
        let rest = wire.readToEnd(timeout: TestDaemon.idleTimeout + 5)
        let elapsed = Date().timeIntervalSince(start)
        #expect(rest.closed && rest.bytes.isEmpty)
        #expect(elapsed > TestDaemon.idleTimeout - 0.5 && elapsed < TestDaemon.idleTimeout + 2)
        daemon.expectServing()
    }

    @Test("keep-alive: two requests on one connection are both answered")
    func keepAlive() throws {
        let wire = try daemon.connect()
        wire.send(Self.versionRequest)
        let first = try #require(try wire.readResponse(timeout: 5))
        #expect(first.status == 200 && first.headers["connection"] == "keep-alive")
        wire.send("GET /v1/apps HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let second = try #require(try wire.readResponse(timeout: 5))
        #expect(second.status == 200 && second.headers["connection"] == "close")
        #expect(String(decoding: second.body, as: UTF8.self) == "[]\n")
        #expect(wire.readToEnd(timeout: 5).closed)
        daemon.expectServing()
    }

    @Test("pipelined requests are answered in order, errors included")
    func pipelined() throws {
        let wire = try daemon.connect()
        wire.send(
            Self.versionRequest + "GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n"
                + "DELETE /v1/version HTTP/1.1\r\nHost: x\r\n\r\n"
                + "GET /v1/apps HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let exchange = wire.readToEnd(timeout: 5)
        #expect(exchange.closed)
        let answers = try HTTPResponse.parseAll(exchange.bytes).map(outcome)
        #expect(answers == ["200 -", "404 notFound", "405 methodNotAllowed", "200 -"])
        daemon.expectServing()
    }

    @Test("a hundred requests on one kept-alive connection are all answered")
    func manyOnOneConnection() throws {
        let wire = try daemon.connect()
        for index in 0..<100 {
            wire.send(
                index.isMultiple(of: 2)
                    ? Self.versionRequest : "GET /v1/apps HTTP/1.1\r\nHost: x\r\n\r\n")
            let response = try #require(try wire.readResponse(timeout: 5), "request \(index)")
            #expect(response.status == 200)
        }
        daemon.expectServing()
    }

    @Test("an HTTP/1.0 request is answered and closed")
    func http10() throws {
        let exchange = try daemon.rawExchange("GET /v1/apps HTTP/1.0\r\n\r\n")
        #expect(exchange.closed)
        let responses = try HTTPResponse.parseAll(exchange.bytes)
        #expect(responses.map(outcome) == ["200 -"])
        daemon.expectServing()
    }
}
