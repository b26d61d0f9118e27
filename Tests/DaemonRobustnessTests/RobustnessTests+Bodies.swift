import Foundation
import Testing

/// Request bodies: JSON a route cannot take, and bodies over `[API] MaxRequestBytes`.
extension DaemonRobustnessTests {
    static let launchMissing = "/v1/apps/com.example.missing/launch"
    /// `MaxRequestBytes` of `[API]`, the default the test daemon runs with.
    static let maxRequestBytes = 1 << 20

    // The launch route decodes its body before it looks the app up: a bad body is 400 even
    // for an app that is not installed.
    @Test("a launch body that is not JSON is 400 badRequest, before the missing app is noticed")
    func launchWithBadJSON() throws {
        #expect(
            outcome(try daemon.request("POST", Self.launchMissing, json: "{bad"))
                == "400 badRequest")
        let notUTF8 = try daemon.request(
            "POST", Self.launchMissing, body: [0xFF, 0xFE, 0x7B],
            headers: [("Content-Type", "application/json")])
        #expect(outcome(notUTF8) == "400 badRequest")
        daemon.expectServing()
    }

    @Test("a launch body of the wrong shape is 400 badRequest")
    func launchWithWrongShape() throws {
        for body in [#"{"arguments": "sleep"}"#, #"{"arguments": [1, 2]}"#, "[]", "null", "42"] {
            #expect(
                outcome(try daemon.request("POST", Self.launchMissing, json: body))
                    == "400 badRequest",
                "\(body)")
        }
        daemon.expectServing()
    }

    @Test("arguments with a NUL, or more than 4096 of them, are 400 badRequest")
    func launchWithHostileArguments() throws {
        let nul = #"{"arguments": ["a\u0000b"]}"#
        #expect(
            outcome(try daemon.request("POST", Self.launchMissing, json: nul)) == "400 badRequest")
        let many =
            #"{"arguments": ["# + Array(repeating: #""x""#, count: 4097).joined(separator: ",")
            + "]}"
        #expect(
            outcome(try daemon.request("POST", Self.launchMissing, json: many)) == "400 badRequest")
        daemon.expectServing()
    }

    @Test("JSON nested 200,000 deep is 400 badRequest, not a stack overflow")
    func launchWithDeepJSON() throws {
        let deep = #"{"arguments": "# + String(repeating: "[", count: 200_000)
        #expect(
            outcome(try daemon.request("POST", Self.launchMissing, json: deep)) == "400 badRequest")
        daemon.expectServing()
    }

    @Test("a launch without a body, or with {}, gets past the body: 404 for the missing app")
    func launchWithoutBody() throws {
        #expect(outcome(try daemon.request("POST", Self.launchMissing)) == "404 notFound")
        #expect(
            outcome(try daemon.request("POST", Self.launchMissing, json: "{}")) == "404 notFound")
        daemon.expectServing()
    }

    @Test("a body of exactly MaxRequestBytes is read; one byte more is 413 tooLarge")
    func bodyAtTheLimit() throws {
        let prefix = #"{"arguments": [""#
        let suffix = #""]}"#
        let filler = String(
            repeating: "x", count: Self.maxRequestBytes - prefix.utf8.count - suffix.utf8.count)
        let atLimit = prefix + filler + suffix
        #expect(atLimit.utf8.count == Self.maxRequestBytes)
        #expect(
            outcome(try daemon.request("POST", Self.launchMissing, json: atLimit)) == "404 notFound"
        )
        let over = prefix + filler + "x" + suffix
        #expect(
            outcome(try daemon.request("POST", Self.launchMissing, json: over)) == "413 tooLarge")
        daemon.expectServing()
    }

    @Test("a body over MaxRequestBytes is refused with 413 and the daemon keeps serving")
    func bodyOverTheLimit() throws {
        let baseline = try daemon.settledFDBaseline()
        // 8 MiB: far more than the daemon reads before it gives up on the connection.
        let huge = [UInt8](repeating: UInt8(ascii: " "), count: 8 << 20)
        let response = try daemon.request(
            "POST", Self.launchMissing, body: huge,
            headers: [("Content-Type", "application/json")])
        #expect(outcome(response) == "413 tooLarge")
        #expect(response.headers["connection"] == "close")
        #expect(daemon.fdCount(settlingTo: baseline) <= baseline)
        daemon.expectServing()
    }

    @Test("a chunked body over MaxRequestBytes is refused with 413 too")
    func chunkedBodyOverTheLimit() throws {
        let wire = try daemon.connect()
        wire.send(
            "POST \(Self.launchMissing) HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        let chunk =
            Array("10000\r\n".utf8) + [UInt8](repeating: UInt8(ascii: " "), count: 0x10000)
            + Array("\r\n".utf8)
        for _ in 0..<40 where wire.send(chunk) {}
        let response = try #require(try wire.readResponse(timeout: 10))
        #expect(outcome(response) == "413 tooLarge")
        daemon.expectServing()
    }

    @Test(
        "a body that stops halfway is dropped at the idle timeout, other clients served meanwhile")
    func bodyThatStops() throws {
        let baseline = try daemon.settledFDBaseline()
        let wire = try daemon.connect()
        wire.send(
            "POST \(Self.launchMissing) HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"argu")
        daemon.expectServing()
        let start = Date()
        let exchange = wire.readToEnd(timeout: TestDaemon.idleTimeout + 5)
        #expect(exchange.closed)
        #expect(Date().timeIntervalSince(start) < TestDaemon.idleTimeout + 2)
        #expect(daemon.fdCount(settlingTo: baseline) <= baseline)
        daemon.expectServing()
    }
}

extension DaemonRobustnessTests {
    // curl sends `Expect: 100-continue` before a large body (an install's tar stream) and waits
    // a second for the go-ahead when none comes.
    @Test(
        "Expect: 100-continue is answered with 100 Continue before the body, then the final answer")
    func expectContinue() throws {
        let wire = try daemon.connect()
        #expect(
            wire.send(
                "POST \(Self.launchMissing) HTTP/1.1\r\nHost: appd\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 2\r\nExpect: 100-continue\r\n\r\n"))
        let interim = wire.readToEnd(timeout: 0.5)
        #expect(
            String(decoding: interim.bytes, as: UTF8.self).hasPrefix("HTTP/1.1 100 Continue\r\n"),
            "\(HTTPResponse.show(interim.bytes[...]))")
        #expect(wire.send("{}"))
        let final = try #require(try wire.readResponse(timeout: 5))
        #expect(outcome(final) == "404 notFound")
        daemon.expectServing()
    }
}
