import AppdAPI
import AppdBase
import Foundation
import Prometheus
import Supervisor
import Synchronization

/// The daemon's Prometheus metrics (`GET /v1/metrics`, text exposition 0.0.4), through
/// swift-prometheus. Two kinds:
///
/// - counted as things happen, in `registry`: launches and exits (from the event hub, so every
///   path that publishes one counts), installs and their durations, API requests;
/// - read when scraped, into a registry made for that scrape: instances by state, memory and
///   CPU per app (cgroup files of the live instances, read once per scrape), installed apps.
///
/// Every label value is appd's own: an installed bundle id, a state or exit reason of the API,
/// a route of the router's table, an HTTP status it sent. Nothing an app writes or a client
/// sends becomes a label, so an app cannot make the series grow.
final class DaemonMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    let startedAt = Date()
    /// Denials per app (the `deny` work): nil until wired, and then the metric
    /// `appd_denials_total{app=}` appears. Never a made-up value.
    let denials = Mutex<(@Sendable () async -> [AppID: Int])?>(nil)
    /// Caches reclaimed per app since the start (Supervisor+Caches.swift), read at scrape time:
    /// `appd_cache_reclaims_total{app=}` and `appd_cache_reclaimed_bytes_total{app=}`.
    let cacheReclaims = Mutex<(@Sendable () -> [AppID: CacheReclaims.Count])?>(nil)
    /// Background fetches per app and result (Supervisor+Fetch.swift), read at scrape time:
    /// `appd_background_fetches_total{app=,result=}`; the results are appd's own words.
    let fetches = Mutex<(@Sendable () -> [AppID: [String: Int]])?>(nil)

    static let installBuckets: [Duration] = [
        .milliseconds(10), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500),
        .seconds(1), .seconds(2.5), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
    ]

    private let installDurations: DurationHistogram

    init() {
        installDurations = registry.makeDurationHistogram(
            descriptor: Self.named(
                "install_duration", "seconds",
                "Time to install or upgrade an app through the API, from the request to the answer"),
            buckets: Self.installBuckets)
    }

    /// `appd_<name>_<unit>` (no unit: `appd_<name>`), as swift-prometheus describes a name.
    static func named(_ name: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "appd", metricName: name, unitName: unit, helpText: help)
    }

    // MARK: Counted as it happens

    func record(_ event: APIEvent) {
        switch event.kind {
        case .launched:
            appCounter(
                Self.named("launches", "total", "Instances launched"), app: event.app, labels: []
            ).increment()
        case .exited:
            let reason = event.exit?.reason.rawValue ?? "unknown"
            appCounter(
                Self.named("exits", "total", "Instances that ended, by exit reason"),
                app: event.app,
                labels: [("reason", reason)]
            ).increment()
        // An app's counters stay for the daemon's life: uninstalled and installed again, it
        // goes on from where it was, never back to 0 (Prometheus reads a counter that went back
        // as a restart). The series are bounded by the bundle ids installed since the start.
        case .uninstalled, .installed, .state, .message, .gap, .denial:
            break
        }
    }

    func recordInstall(_ duration: Duration, succeeded: Bool) {
        registry.makeCounter(
            descriptor: Self.named(
                "installs", "total", "Installs and upgrades through the API, by result"),
            labels: [("result", succeeded ? "ok" : "failed")]
        ).increment()
        if succeeded { installDurations.record(duration) }
    }

    func recordRequest(route: String, status: Int) {
        registry.makeCounter(
            descriptor: Self.named(
                "api_requests", "total",
                "API requests answered, by route (the router's pattern) and HTTP status"),
            labels: [("route", route), ("status", String(status))]
        ).increment()
    }

    private func appCounter(
        _ descriptor: MetricNameDescriptor, app: String, labels: [(String, String)]
    ) -> Counter {
        registry.makeCounter(descriptor: descriptor, labels: [("app", app)] + labels)
    }

    // MARK: Read when scraped

    /// The whole exposition: the counters, then what the scrape read. Each per-app series is
    /// an installed app's, labelled as the registry spells it, whatever the spelling of the
    /// instances, denials and reclaims it sums.
    func render(usage: [APIInstanceUsage], installed: [AppID], endedCPU: [AppID: Double]) async
        -> [UInt8]
    {
        let now = PrometheusCollectorRegistry()
        now.makeGauge(
            descriptor: Self.named("start_time", "seconds", "When this daemon started (Unix time)"),
            labels: []
        )
        .set(startedAt.timeIntervalSince1970)
        now.makeGauge(descriptor: Self.named("apps_installed", "", "Apps installed"), labels: [])
            .set(Double(installed.count))
        var byState: [InstanceState: Int] = [:]
        for instance in usage { byState[instance.state, default: 0] += 1 }
        for state in InstanceState.allCases where state != .exited && state != .running {
            now.makeGauge(
                descriptor: Self.named("instances", "", "Live instances, by state"),
                labels: [("state", state.rawValue)]
            ).set(Double(byState[state] ?? 0))
        }
        // Per installed app (label values come from the registry, never from the instances).
        var memory: [AppID: Int64] = [:]
        var cpu = endedCPU
        var live: Set<AppID> = []
        for instance in usage {
            let app = AppID(instance.app)
            live.insert(app)
            if let bytes = instance.memoryBytes { memory[app, default: 0] += bytes }
            if let seconds = instance.cpuSeconds { cpu[app, default: 0] += seconds }
        }
        for app in installed {
            if live.contains(app) {
                now.makeGauge(
                    descriptor: Self.named(
                        "app_memory", "bytes",
                        "Memory charged to the app's live instances (cgroup memory.current / memory.usage_in_bytes)"
                    ), labels: [("app", app.spelling)]
                )
                .set(Double(memory[app] ?? 0))
            }
            if let seconds = cpu[app] {
                now.makeCounter(
                    descriptor: Self.named(
                        "app_cpu", "seconds_total",
                        "CPU time of the app's instances since this daemon started (cgroup cpu.stat usage_usec)"
                    ), labels: [("app", app.spelling)]
                )
                .increment(by: max(0, seconds))
            }
        }
        if let source = denials.withLock({ $0 }) {
            let counts = await source()
            for app in installed {
                guard let count = counts[app] else { continue }
                now.makeCounter(
                    descriptor: Self.named(
                        "denials", "total", "Operations the sandbox refused, per app"),
                    labels: [("app", app.spelling)]
                ).increment(by: Int64(max(0, count)))
            }
        }
        if let source = cacheReclaims.withLock({ $0 }) {
            let counts = source()
            for app in installed {
                guard let count = counts[app] else { continue }
                now.makeCounter(
                    descriptor: Self.named(
                        "cache_reclaims", "total",
                        "Times the app's Library/Caches was emptied to free space"),
                    labels: [("app", app.spelling)]
                ).increment(by: Int64(max(0, count.reclaims)))
                now.makeCounter(
                    descriptor: Self.named(
                        "cache_reclaimed_bytes", "total",
                        "Bytes freed by emptying the app's Library/Caches"),
                    labels: [("app", app.spelling)]
                ).increment(by: max(0, count.bytes))
            }
        }
        if let source = fetches.withLock({ $0 }) {
            let counts = source()
            for app in installed {
                guard let byResult = counts[app] else { continue }
                for result in FetchCounts.results {
                    guard let count = byResult[result] else { continue }
                    now.makeCounter(
                        descriptor: Self.named(
                            "background_fetches", "total",
                            "Background fetches of the app, by result: woken, newData, noData, failed, missed (no answer by FetchDeadline), deferred (memory pressure)"
                        ),
                        labels: [("app", app.spelling), ("result", result)]
                    ).increment(by: Int64(max(0, count)))
                }
            }
        }
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        now.emit(into: &buffer)
        return buffer
    }
}

extension Reply {
    /// What the client is told first: a stream starts with 200.
    var status: Int {
        switch self {
        case .json(let status, _, _): status
        case .stream: 200
        }
    }
}
