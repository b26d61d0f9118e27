// appd-bench: the HTTP client of scripts/bench-api and scripts/bench-scale. Plain blocking
// sockets, one thread per connection, keep-alive HTTP/1.1 with Content-Length framing: on a
// 2-core machine the client shares the CPUs with the daemon, so it has to be cheap (a Python
// or NIO client would spend more per request than the daemon's cheapest route).
import ArgumentParser
import Foundation

struct AppdBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "appd-bench",
        abstract: "Load the appd API on its Unix socket and print what it measured as JSON.",
        subcommands: [LoadCommand.self, BatchCommand.self])
}

struct LoadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load",
        abstract: "GET the paths in a closed loop over N keep-alive connections.",
        discussion: """
            Prints one JSON object: requests, seconds, rps, p50/p90/p99/max latency in ms, \
            errors (and the first few), bytes per response. `{A-B}` in a path is a random \
            number in A...B, zero-padded to A's width.
            """)

    @Option(help: "The daemon's socket.") var socket: String
    @Option(help: "Concurrent keep-alive connections (one thread each).") var connections = 8
    @Option(help: "Seconds of load before measuring starts.") var warmup = 1.0
    @Option(help: "Seconds measured.") var duration = 5.0
    @Argument(help: "Request paths, cycled (e.g. /v1/apps/com.example.bench{0000-0999}).")
    var paths: [String]

    func run() throws {
        guard connections > 0, duration > 0, warmup >= 0 else {
            throw ValidationError("--connections and --duration must be positive")
        }
        let result = try Load(
            socket: socket, connections: connections, warmup: warmup, duration: duration,
            paths: paths
        ).run()
        let sorted = result.latencies.sorted()
        func ms(_ q: Double) -> Double {
            guard !sorted.isEmpty else { return 0 }
            return Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))]) / 1e6
        }
        let summary: [String: Any] = [
            "requests": result.requests, "connections": connections,
            "seconds": result.seconds, "rps": Double(result.requests) / result.seconds,
            "p50_ms": ms(0.50), "p90_ms": ms(0.90), "p99_ms": ms(0.99),
            "max_ms": Double(sorted.last ?? 0) / 1e6,
            "mean_ms": sorted.isEmpty
                ? 0 : Double(sorted.reduce(0, +)) / Double(sorted.count) / 1e6,
            "errors": result.errors.count, "first_errors": Array(result.errors.prefix(3)),
            "bytes_per_response": result.requests == 0 ? 0 : result.bytes / result.requests,
            "client_cpu_s": cpuSeconds(),
        ]
        try printJSON(summary)
    }
}

struct BatchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "batch",
        abstract: "Send each request of stdin once, over N connections at the same time.",
        discussion: """
            Each stdin line is `METHOD PATH` or `METHOD PATH JSON-BODY`. Prints one JSON line \
            per request, in input order ({"status", "ms", "body"}), then \
            {"summary": {"requests", "connections", "wall_ms", "p50_ms", "max_ms"}}.
            """)

    @Option(help: "The daemon's socket.") var socket: String
    @Option(help: "Concurrent connections (1: one request after the other).") var connections = 1

    func run() throws {
        guard connections > 0 else { throw ValidationError("--connections must be positive") }
        var lines: [String] = []
        while let line = readLine() {
            if !line.isEmpty { lines.append(line) }
        }
        let (answers, wall) = try Batch(socket: socket, connections: connections, lines: lines)
            .run()
        for answer in answers {
            // The daemon's JSON is one line with a newline after it.
            let trimmed = answer.body.trimmingCharacters(in: .whitespacesAndNewlines)
            let body = trimmed.isEmpty ? "null" : trimmed
            print(
                "{\"status\": \(answer.status), \"ms\": \(Double(answer.nanoseconds) / 1e6), \"body\": \(body)}"
            )
        }
        let sorted = answers.map(\.nanoseconds).sorted()
        try printJSON([
            "summary": [
                "requests": answers.count, "connections": min(connections, lines.count),
                "wall_ms": Double(wall) / 1e6,
                "p50_ms": sorted.isEmpty ? 0 : Double(sorted[sorted.count / 2]) / 1e6,
                "max_ms": Double(sorted.last ?? 0) / 1e6,
            ] as [String: Any]
        ])
    }
}

/// CPU time this process used (user + system): what the client took from the daemon.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

func printJSON(_ value: Any) throws {
    let data = try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys])
    print(String(decoding: data, as: UTF8.self))
}

AppdBench.main()
