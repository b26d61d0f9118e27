import Foundation
import Glibc
import Testing

/// The real `appd serve`, attacked through its socket. Every test checks both that the hostile
/// request got the answer it deserves (or the connection closed) and that the daemon, the same
/// process, still serves `GET /v1/version` afterwards. Each test gets a daemon of its own.
@Suite(
    .serialized,
    .enabled(
        if: getuid() == 0 || ProcessInfo.processInfo.environment["APPD_REQUIRE_ROOT_TESTS"] == "1",
        "requires root: appd serve creates cgroups"))
struct DaemonRobustnessTests {
    let daemon: TestDaemon

    init() throws { daemon = try TestDaemon() }

    /// Requests NIO's parser refuses: it answers 400 with no body and closes.
    static let malformed: [Malformed] = [
        Malformed("garbage bytes", [0x00, 0x01, 0xFF, 0xFE, 0x7F] + Array("\r\n\r\n".utf8)),
        Malformed("a request line without a version", "GET /v1/version\r\n\r\n"),
        Malformed(
            "a header line without a colon",
            "GET /v1/version HTTP/1.1\r\nHost: x\r\nNo Colon\r\n\r\n"),
        Malformed(
            "a header over 80 KiB",
            "GET /v1/version HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 81 << 10))\r\n\r\n"
        ),
        Malformed("a NUL in a header value", "GET /v1/version HTTP/1.1\r\nHost: a\0b\r\n\r\n"),
        Malformed("a space in the path", "GET /v1/ver sion HTTP/1.1\r\nHost: x\r\n\r\n"),
        Malformed("bare LF line ends", "GET /v1/version HTTP/1.1\nHost: x\n\n"),
        Malformed("an HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
        Malformed(
            "a Content-Length that is no number",
            "POST /v1/apps/com.example.x/launch HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}"
        ),
        Malformed(
            "two different Content-Lengths",
            "POST /v1/apps/com.example.x/launch HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}"
        ),
        Malformed(
            "Content-Length and chunked together (smuggling)",
            "POST /v1/apps/com.example.x/launch HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        ),
        Malformed(
            "an invalid chunk size in a body the route reads",
            "POST /v1/apps/com.example.x/launch HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
        ),
        // The route answers without reading the body: the parse error comes after its answer
        // is ready. This one killed a debug daemon (two answers to one request).
        Malformed(
            "an invalid chunk size in a body the route ignores",
            "GET /v1/version HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"
        ),
    ]

    @Test(
        "malformed HTTP is answered 400 and closed, and the daemon keeps serving",
        arguments: malformed)
    func malformedHTTP(_ request: Malformed) throws {
        let exchange = try daemon.rawExchange(request.bytes)
        #expect(exchange.closed, "the daemon kept the connection open")
        let responses = try HTTPResponse.parseAll(exchange.bytes)
        #expect(!responses.isEmpty, "closed without an answer")
        #expect(responses.allSatisfy { $0.status == 400 }, "\(responses.map(\.status))")
        daemon.expectServing()
    }

    @Test("malformed HTTP sent 50 times over does not kill the daemon or leak connections")
    func malformedRepeated() throws {
        let baseline = try daemon.settledFDBaseline()
        for _ in 0..<50 {
            for request in Self.malformed { _ = try daemon.rawExchange(request.bytes, timeout: 2) }
        }
        #expect(daemon.fdCount(settlingTo: baseline) <= baseline)
        daemon.expectServing()
    }

    @Test("an unknown route is 404 notFound, a path outside /v1 too, with a JSON error body")
    func unknownRoutes() throws {
        for path in [
            "/v1/nothing", "/v1/apps/com.example.x/nothing", "/version", "/", "/v2/version",
        ] {
            let response = try daemon.request("GET", path)
            #expect(outcome(response) == "404 notFound", "GET \(path)")
            #expect(response.headers["content-type"] == "application/json")
        }
        daemon.expectServing()
    }

    @Test("a wrong method is 405 methodNotAllowed naming the methods the path takes")
    func wrongMethod() throws {
        let response = try daemon.request("DELETE", "/v1/version")
        #expect(outcome(response) == "405 methodNotAllowed")
        #expect(String(decoding: response.body, as: UTF8.self).contains("use GET"))
        let launch = try daemon.request("GET", "/v1/apps/com.example.x/launch")
        #expect(outcome(launch) == "405 methodNotAllowed")
        daemon.expectServing()
    }

    @Test("a path with invalid percent-encoding is 400 badRequest")
    func badPercentEncoding() throws {
        #expect(outcome(try daemon.request("GET", "/v1/apps/%FF%FE")) == "400 badRequest")
        daemon.expectServing()
    }
}

/// A request no HTTP/1.1 parser should take, named for the test report.
struct Malformed: Sendable, CustomTestStringConvertible {
    var name: String
    var bytes: [UInt8]

    init(_ name: String, _ bytes: [UInt8]) {
        self.name = name
        self.bytes = bytes
    }

    init(_ name: String, _ text: String) { self.init(name, Array(text.utf8)) }

    var testDescription: String { name }
}
