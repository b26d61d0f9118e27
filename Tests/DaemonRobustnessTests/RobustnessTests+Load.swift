import Foundation
import Glibc
import Synchronization
import Testing

/// Many clients at once: every one answered, and nothing kept once they are gone.
extension DaemonRobustnessTests {
    /// Allowed growth of the daemon's resident memory from the end of a first round of 1,000
    /// connections to the end of a third. The first round grows the heap to what 1,000 live
    /// connections need (measured: 1.7 MiB over the idle daemon, so about 1.7 KiB each); later
    /// rounds reuse it (measured: 0-16 KiB). 1 MiB over the 2,000 connections of rounds two and
    /// three is 0.5 KiB each: a connection leaking a third of what it holds while alive fails.
    static let rssGrowthBound = 1 << 20

    @Test(
        "1,000 connections at once are all answered 200; fds return to baseline and RSS stays bounded"
    )
    func thousandConcurrent() throws {
        try #require(
            TestDaemon.fileLimit >= 2500,
            "RLIMIT_NOFILE \(TestDaemon.fileLimit) is too low for 1,000 connections")
        let baseline = try daemon.settledFDBaseline()
        let rssBefore = daemon.rssBytes()
        var rssAfterRounds: [Int] = []
        for round in 0..<3 {
            let responses = try daemon.concurrentRequests(count: 1000, "GET", "/v1/apps")
            let answered = responses.compactMap { $0 }.filter { $0.status == 200 }.count
            #expect(answered == 1000, "round \(round): \(answered) of 1000 answered 200")
            let fds = daemon.fdCount(settlingTo: baseline)
            #expect(fds <= baseline, "round \(round): \(fds) fds open, \(baseline) before")
            rssAfterRounds.append(daemon.rssBytes())
        }
        // The first round grows the heap to what 1,000 connections need; later rounds reuse it.
        let growth = rssAfterRounds[2] - rssAfterRounds[0]
        #expect(
            growth < Self.rssGrowthBound,
            "RSS \(rssBefore >> 10) KiB before, \(rssAfterRounds.map { $0 >> 10 }) KiB after each round"
        )
        print(
            "fd baseline \(baseline); RSS \(rssBefore >> 10) KiB before, after each round of 1,000: \(rssAfterRounds.map { $0 >> 10 }) KiB"
        )
        daemon.expectServing()
    }

    @Test("50 threads of 20 requests each, mixed routes, are all answered as they should be")
    func threadsOfRequests() throws {
        let baseline = try daemon.settledFDBaseline()
        let results = Mutex([String]())
        let daemon = daemon
        DispatchQueue.concurrentPerform(iterations: 50) { thread in
            var seen: [String] = []
            for index in 0..<20 {
                let (method, path, expected) = Self.mixedRequests[
                    (thread + index) % Self.mixedRequests.count]
                let answer = (try? daemon.request(method, path)).map(outcome) ?? "no answer"
                if answer != expected {
                    seen.append("\(method) \(path): \(answer), expected \(expected)")
                }
            }
            results.withLock { $0 += seen }
        }
        #expect(results.withLock { $0 } == [])
        #expect(daemon.fdCount(settlingTo: baseline) <= baseline)
        daemon.expectServing()
    }

    static let mixedRequests: [(String, String, String)] = [
        ("GET", "/v1/version", "200 -"),
        ("GET", "/v1/apps", "200 -"),
        ("GET", "/v1/instances", "200 -"),
        ("GET", "/v1/apps/com.example.none", "404 notFound"),
        ("GET", "/v1/instances/000000000000", "404 notFound"),
        ("DELETE", "/v1/apps", "405 methodNotAllowed"),
        ("POST", "/v1/apps/com.example.none/launch", "404 notFound"),
    ]
}
