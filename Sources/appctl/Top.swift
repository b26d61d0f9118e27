import AppdAPI
import AppdCLI
import AppdClient
import ArgumentParser

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

struct Top: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "top",
        abstract: "Show what each running instance uses: CPU, memory, state, uptime.",
        discussion: """
            One row per live instance: INSTANCE APP STATE CPU% MEM UPTIME, busiest first. CPU% \
            is the share of one CPU the instance's cgroup used between two samples (200% is two \
            CPUs busy); MEM is what its cgroup is charged now (page cache included). On a \
            terminal the table refreshes every --interval seconds until interrupted; with \
            --once, when the output is not a terminal, or with --json it prints one snapshot \
            (two samples --interval apart, at most 1 s). --json prints each instance with \
            cpuPercent, memoryBytes and uptimeSeconds.

            Examples:
              appctl top
              appctl top --once com.example.notes
              appctl top --json | jq '.[] | select(.cpuPercent > 50)'
            """)

    @OptionGroup var options: GlobalOptions

    @Flag(help: "Print one snapshot and exit.")
    var once = false

    @Option(help: ArgumentHelp("Seconds between refreshes (0.2 to 60).", valueName: "seconds"))
    var interval: Double = 2

    @Argument(
        help: ArgumentHelp("Only this app's instances.", valueName: "id"),
        completion: .custom(ShellCompletion.targets))
    var app: String?

    func validate() throws {
        guard interval.isFinite, (0.2...60).contains(interval) else {
            throw ValidationError("--interval takes 0.2 to 60 seconds, not \(interval)")
        }
    }

    struct Row: Codable, Equatable {
        var id: String
        var app: String
        var state: InstanceState
        /// Nil for an instance seen in one sample only, or without CPU accounting.
        var cpuPercent: Double?
        var memoryBytes: Int64?
        var uptimeSeconds: Double
    }

    func run() throws {
        try options.run {
            let client = options.client
            let live = !once && !options.json && isatty(1) == 1
            var previous = try client.usage(app: app)
            if !live {
                usleep(useconds_t(min(interval, 1) * 1_000_000))
                let current = try client.usage(app: app)
                let rows = Self.rows(previous, current)
                if options.json {
                    Output.json(rows)
                } else {
                    Self.printTable(rows)
                }
                return
            }
            while true {
                usleep(useconds_t(interval * 1_000_000))
                let current = try client.usage(app: app)
                // Home, clear, then the table: a refreshing screen as top(1) draws it.
                Swift.print("\u{1B}[H\u{1B}[2J", terminator: "")
                Swift.print(
                    "appd top  \(TextFormatting.iso8601(current.sampledAt))  every \(interval)s\n"
                )
                Self.printTable(Self.rows(previous, current))
                fflush(nil)
                previous = current
            }
        }
    }

    /// CPU% from two samples of the same instances; busiest first, then oldest.
    static func rows(_ before: APIUsage, _ after: APIUsage) -> [Row] {
        let earlier = Dictionary(
            before.instances.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let elapsed = after.sampledAt.timeIntervalSince(before.sampledAt)
        return after.instances.map { instance in
            var percent: Double?
            if elapsed > 0, let now = instance.cpuSeconds,
                let then = earlier[instance.id]?.cpuSeconds
            {
                percent = max(0, now - then) / elapsed * 100
            }
            return Row(
                id: instance.id, app: instance.app, state: instance.state, cpuPercent: percent,
                memoryBytes: instance.memoryBytes,
                uptimeSeconds: max(0, after.sampledAt.timeIntervalSince(instance.startedAt)))
        }
        .sorted {
            ($0.cpuPercent ?? -1, -$0.uptimeSeconds) > ($1.cpuPercent ?? -1, -$1.uptimeSeconds)
        }
    }

    static func printTable(_ rows: [Row]) {
        guard !rows.isEmpty else {
            Swift.print("No running instances.")
            return
        }
        Table.print(
            [["INSTANCE", "APP", "STATE", "CPU%", "MEM", "UPTIME"]]
                + rows.map { row in
                    [
                        row.id, row.app, row.state.rawValue,
                        row.cpuPercent.map { TextFormatting.printf("%.1f", $0) } ?? "-",
                        row.memoryBytes.map(Output.bytes) ?? "-",
                        Table.duration(row.uptimeSeconds),
                    ]
                })
    }
}
