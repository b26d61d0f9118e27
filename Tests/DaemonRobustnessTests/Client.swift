import Foundation
import Glibc
import Testing

/// Talking to the daemon, from well-formed requests to arbitrary bytes.
extension TestDaemon {
    func connect() throws -> Wire { try Wire(socket) }

    /// A plain HTTP/1.1 request with `Connection: close`, and its answer.
    func request(
        _ method: String, _ path: String, body: [UInt8]? = nil, headers: [(String, String)] = [],
        timeout: Double = 10
    ) throws -> HTTPResponse {
        let wire = try connect()
        var head = "\(method) \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body { head += "Content-Length: \(body.count)\r\n" }
        // The daemon may answer (and close) before it has read the whole body: that is fine.
        wire.send(Array((head + "\r\n").utf8) + (body ?? []))
        guard let response = try wire.readResponse(timeout: timeout) else {
            throw WireError("\(method) \(path): the daemon closed the connection without an answer")
        }
        return response
    }

    func request(_ method: String, _ path: String, json: String) throws -> HTTPResponse {
        try request(
            method, path, body: Array(json.utf8), headers: [("Content-Type", "application/json")])
    }

    /// Sends `bytes` on a new connection and reads until the daemon closes it or `timeout`
    /// seconds pass. The write side stays open: the daemon takes a client's EOF for the
    /// client going away and answers nothing more.
    func rawExchange(_ bytes: [UInt8], timeout: Double = 5) throws -> (bytes: [UInt8], closed: Bool)
    {
        let wire = try connect()
        wire.send(bytes)
        return wire.readToEnd(timeout: timeout)
    }

    func rawExchange(_ text: String, timeout: Double = 5) throws -> (bytes: [UInt8], closed: Bool) {
        try rawExchange(Array(text.utf8), timeout: timeout)
    }

    /// `count` connections open at once, each sending one request once all are connected; the
    /// answers in order.
    func concurrentRequests(count: Int, _ method: String, _ path: String) throws -> [HTTPResponse?]
    {
        let wires = try (0..<count).map { _ in try connect() }
        let request = Array(
            "\(method) \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".utf8)
        for wire in wires { wire.send(request) }
        return wires.map { try? $0.readResponse(timeout: 20) }
    }

    /// What every test ends with: the daemon is alive, the same process, and still answers.
    func expectServing(sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(isAlive, "appd serve died:\n\(stderr)", sourceLocation: sourceLocation)
        let version = Result { try request("GET", "/v1/version") }
        let response = try? version.get()
        #expect(
            response?.status == 200, "GET /v1/version: \(version)", sourceLocation: sourceLocation)
        let answeredPID = (response?.json as? [String: Any])?["pid"] as? Int
        #expect(answeredPID == Int(pid), "another daemon answered", sourceLocation: sourceLocation)
    }
}

/// The status code and error code of an answer, to compare in one `#expect`.
func outcome(_ response: HTTPResponse) -> String {
    "\(response.status) \(response.errorCode ?? "-")"
}
