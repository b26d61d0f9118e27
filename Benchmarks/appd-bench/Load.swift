import Foundation
import Synchronization

/// Closed-loop load: every connection sends its next request as soon as the previous answer
/// is in, for `duration` seconds after `warmup` seconds that are not counted.
struct Load {
    var socket: String
    var connections: Int
    var warmup: Double
    var duration: Double
    /// Request paths; `{A-B}` in one is replaced by a uniformly random number in A...B,
    /// zero-padded to the width of A (`/v1/apps/com.example.bench{0000-0999}`).
    var paths: [String]

    struct Result {
        var requests: Int
        var seconds: Double
        var latencies: [UInt64]
        var errors: [String]
        var bytes: Int
    }

    func run() throws -> Result {
        let templates = try paths.map(PathTemplate.init)
        let gate = Gate(parties: connections)
        let results = Mutex<[(latencies: [UInt64], errors: [String], bytes: Int)]>([])
        let measureStart = Mutex<UInt64>(0)
        let warmupNanos = UInt64(warmup * 1e9)
        let durationNanos = UInt64(duration * 1e9)
        let setupFailure = Mutex<String?>(nil)

        runThreads(connections) { index in
            var generator = SplitMix(seed: UInt64(index) &+ 0x9E37_79B9_7F4A_7C15)
            // Requests are built before the clock starts: 4096 per connection, cycled.
            let requests = (0..<4096).map { i in
                Connection.request("GET", templates[i % templates.count].render(&generator))
            }
            let connection: Connection
            do {
                connection = try Connection(socket: socket)
            } catch {
                setupFailure.withLock { $0 = "\(error)" }
                gate.arrive()
                return
            }
            let start = gate.arrive()
            // Every thread has arrived: a failed connection is known by now.
            if setupFailure.withLock({ $0 }) != nil { return }
            measureStart.withLock { $0 = start + warmupNanos }
            var latencies: [UInt64] = []
            latencies.reserveCapacity(1 << 20)
            var errors: [String] = []
            var bytes = 0
            var next = 0
            let measureFrom = start + warmupNanos
            let end = measureFrom + durationNanos
            while true {
                let sent = now()
                if sent >= end { break }
                do {
                    let response = try connection.exchange(requests[next])
                    let elapsed = now() - sent
                    next = (next + 1) % requests.count
                    guard sent >= measureFrom else { continue }
                    latencies.append(elapsed)
                    bytes += response.bytes
                    if response.status != 200 {
                        errors.append(
                            "status \(response.status): \(String(decoding: response.body.prefix(200), as: UTF8.self))"
                        )
                    }
                } catch {
                    errors.append("\(error)")
                    break
                }
            }
            results.withLock { $0.append((latencies, errors, bytes)) }
        }
        if let failure = setupFailure.withLock({ $0 }) {
            throw Connection.Failure(description: failure)
        }
        let finished = now()
        let all = results.withLock { $0 }
        let latencies = all.flatMap(\.latencies)
        return Result(
            requests: latencies.count,
            seconds: Double(finished - measureStart.withLock { $0 }) / 1e9,
            latencies: latencies, errors: all.flatMap(\.errors),
            bytes: all.map(\.bytes).reduce(0, +))
    }
}

struct PathTemplate {
    var prefix: String
    var suffix: String
    var range: ClosedRange<Int>?
    var width = 0

    init(_ text: String) throws {
        guard let open = text.firstIndex(of: "{"), let close = text[open...].firstIndex(of: "}")
        else {
            prefix = text
            suffix = ""
            return
        }
        let spec = text[text.index(after: open)..<close].split(separator: "-")
        guard spec.count == 2, let low = Int(spec[0]), let high = Int(spec[1]), low <= high else {
            throw Connection.Failure(description: "bad range in \(text): want {LOW-HIGH}")
        }
        prefix = String(text[..<open])
        suffix = String(text[text.index(after: close)...])
        range = low...high
        width = spec[0].count
    }

    func render(_ generator: inout SplitMix) -> String {
        guard let range else { return prefix }
        let number = String(Int.random(in: range, using: &generator))
        return prefix + String(repeating: "0", count: max(0, width - number.count)) + number
            + suffix
    }
}

/// A small seeded generator: the random ids are the same on every run.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Lets every thread connect before any sends: returns the common start time to each.
final class Gate: @unchecked Sendable {
    private let condition = NSCondition()
    private var waiting = 0
    private var start: UInt64?
    private let parties: Int

    init(parties: Int) { self.parties = parties }

    @discardableResult
    func arrive() -> UInt64 {
        condition.lock()
        defer { condition.unlock() }
        waiting += 1
        if waiting == parties {
            start = now()
            condition.broadcast()
        }
        while start == nil { condition.wait() }
        return start ?? 0
    }
}

/// Runs `body(i)` for i in 0..<count, each on a thread of its own, and waits for all.
func runThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        let thread = Thread {
            body(index)
            group.leave()
        }
        // 200 connections are 200 threads: small stacks are plenty.
        thread.stackSize = 256 << 10
        thread.start()
    }
    group.wait()
}
