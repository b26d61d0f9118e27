import Foundation
import Synchronization

/// A list of requests sent once each over `connections` connections at the same time: each
/// connection takes the next request not yet taken. One connection sends them one after the
/// other; as many connections as requests sends them all at once.
struct Batch {
    var socket: String
    var connections: Int
    /// `METHOD PATH` or `METHOD PATH BODY` (a JSON body, the rest of the line).
    var lines: [String]

    struct Answer {
        var status: Int
        var nanoseconds: UInt64
        var body: String
    }

    func run() throws -> (answers: [Answer], wallNanoseconds: UInt64) {
        let requests = try lines.map { line -> [UInt8] in
            let parts = line.split(separator: " ", maxSplits: 2).map(String.init)
            guard parts.count >= 2 else {
                throw Connection.Failure(description: "bad request line: \(line)")
            }
            return Connection.request(parts[0], parts[1], body: parts.count > 2 ? parts[2] : nil)
        }
        let connections = min(connections, requests.count)
        let next = Atomic<Int>(0)
        let gate = Gate(parties: connections)
        let answers = Mutex<[Int: Answer]>([:])
        let failures = Mutex<[String]>([])
        let started = Mutex<UInt64>(0)
        runThreads(connections) { _ in
            let connection: Connection
            do {
                connection = try Connection(socket: socket)
            } catch {
                failures.withLock { $0.append("\(error)") }
                gate.arrive()
                return
            }
            let start = gate.arrive()
            started.withLock { $0 = start }
            while true {
                let index = next.wrappingAdd(1, ordering: .relaxed).oldValue
                guard index < requests.count else { break }
                let sent = now()
                do {
                    let response = try connection.exchange(requests[index])
                    let answer = Answer(
                        status: response.status, nanoseconds: now() - sent,
                        body: String(decoding: response.body, as: UTF8.self))
                    answers.withLock { $0[index] = answer }
                } catch {
                    failures.withLock { $0.append("request \(index): \(error)") }
                    break
                }
            }
        }
        let wall = now() - started.withLock { $0 }
        if let failure = failures.withLock({ $0.first }) {
            throw Connection.Failure(description: failure)
        }
        let all = answers.withLock { $0 }
        return ((0..<requests.count).compactMap { all[$0] }, wall)
    }
}
