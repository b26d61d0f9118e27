import Foundation
import Glibc
import Testing

/// A seeded mutation run: requests built from the API's own routes, then bent (odd methods,
/// paths and percent-encodings, header names and values, lengths and chunk sizes that lie,
/// cut short, bytes flipped). Whatever arrives, each connection gets well-formed HTTP answers,
/// appd's with a JSON error body, NIO's parse-error 400 with none (and a `100 Continue` before
/// them where the request asked for it), or is closed; the daemon
/// never dies and keeps no connection it has no use for.
extension DaemonRobustnessTests {
    static let fuzzSeed: UInt64 = 0x00A9_9D5E_ED00_0001

    @Test(
        "a few hundred mutated requests get HTTP answers or a close; the daemon lives and leaks no fd"
    )
    func fuzz() throws {
        let baseline = try daemon.settledFDBaseline()
        let registryBefore = daemon.registryFDCount()
        var generator = SeededGenerator(seed: Self.fuzzSeed)
        var failures: [String] = []
        var statuses: [Int: Int] = [:]
        for batch in 0..<2 {
            let cases = (0..<250).map { _ in FuzzRequest.make(using: &generator) }
            // All of a batch at once: the daemon works on them together, and the ones it must
            // wait out (cut short) cost one idle timeout, not one each.
            let wires = try cases.map { request -> Wire in
                let wire = try daemon.connect()
                wire.send(request.bytes)
                return wire
            }
            let deadline = Date(timeIntervalSinceNow: TestDaemon.idleTimeout + 5)
            for (index, (request, wire)) in zip(cases, wires).enumerated() {
                let exchange = wire.readToEnd(timeout: max(0.1, deadline.timeIntervalSinceNow))
                let problem = Self.check(request, exchange, statuses: &statuses)
                if let problem {
                    failures.append("batch \(batch) case \(index): \(problem)\n  sent \(request)")
                }
            }
        }
        #expect(
            failures.isEmpty,
            "\(failures.count) bad exchanges:\n\(failures.prefix(10).joined(separator: "\n"))")
        #expect(daemon.isAlive, "appd serve died:\n\(daemon.stderr)")
        #expect(
            daemon.fdCount(settlingTo: baseline) <= baseline, "\(daemon.openFDTargets().sorted())")
        // The run must reach the router, not only NIO's parser.
        #expect(
            statuses.filter { [200, 404, 405].contains($0.key) }.values.reduce(0, +) > 50,
            "\(statuses)")
        print(
            "fuzz statuses: \(statuses.sorted { $0.key < $1.key }); registry fds \(registryBefore) before, \(daemon.registryFDCount()) after"
        )
        daemon.expectServing()
    }

    /// What is wrong with the answer to `request`, if anything.
    static func check(
        _ request: FuzzRequest, _ exchange: (bytes: [UInt8], closed: Bool),
        statuses: inout [Int: Int]
    )
        -> String?
    {
        guard exchange.closed else { return "still open after the idle timeout" }
        let responses: [HTTPResponse]
        do {
            responses = try HTTPResponse.parseAll(exchange.bytes, bodiless: request.isHead)
        } catch {
            return "not HTTP: \(error)"
        }
        let askedToContinue = String(decoding: request.bytes, as: UTF8.self).lowercased().contains(
            "100-continue")
        for response in responses {
            statuses[response.status, default: 0] += 1
            // The go-ahead for a body, to a request that asked for one (a final answer follows
            // unless the request was cut short).
            if response.status == 100, askedToContinue,
                response.fromAppd || response.headers.isEmpty
            {
                continue
            }
            guard (200..<600).contains(response.status) else { return "status \(response.status)" }
            if response.fromAppd {
                if response.status >= 400 && response.errorCode == nil && !request.isHead {
                    return
                        "\(response.status) without a JSON error: \(HTTPResponse.show(Array(response.body)[...]))"
                }
            } else if response.status != 400 || !response.body.isEmpty {
                return "an answer neither from appd nor NIO's 400: \(response.status)"
            }
        }
        return nil
    }
}
