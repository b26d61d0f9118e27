import AppdAPI
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
    /// The counters with an `app` label, per app (lowercased): dropped when the app is
    /// uninstalled, so the series follow the installed apps.
    private let perApp = Mutex<[String: [Counter]]>([:])
    /// Denials per app (the `deny` work): nil until wired, and then the metric
    /// `appd_denials_total{app=}` appears. Never a made-up value.
    let denials = Mutex<(@Sendable () async -> [String: Int])?>(nil)

    static let installBuckets: [Duration] = [
        .milliseconds(10), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
        .seconds(1), .seconds(2.5), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
    ]

    private let installDurations: DurationHistogram

    init() {
        installDurations = registry.makeDurationHistogram(
            name: "appd_install_duration_seconds", labels: [], buckets: Self.installBuckets,
            help: "Time to install or upgrade an app through the API, from the request to the answer")
    }

    // MARK: Counted as it happens

    func record(_ event: APIEvent) {
        switch event.kind {
        case .launched:
            appCounter("appd_launches_total", app: event.app, labels: [],
                help: "Instances launched").increment()
        case .exited:
            let reason = event.exit?.reason.rawValue ?? "unknown"
            appCounter("appd_exits_total", app: event.app, labels: [("reason", reason)],
                help: "Instances that ended, by exit reason").increment()
        case .uninstalled:
            let counters = perApp.withLock { $0.removeValue(forKey: event.app.lowercased()) } ?? []
            for counter in counters { registry.unregisterCounter(counter) }
        case .installed, .state, .message, .gap:
            break
        }
    }

    func recordInstall(_ duration: Duration, succeeded: Bool) {
        registry.makeCounter(
            name: "appd_installs_total", labels: [("result", succeeded ? "ok" : "failed")],
            help: "Installs and upgrades through the API, by result"
        ).increment()
        if succeeded { installDurations.record(duration) }
    }

    func recordRequest(route: String, status: Int) {
        registry.makeCounter(
            name: "appd_api_requests_total", labels: [("route", route), ("status", String(status))],
            help: "API requests answered, by route (the router's pattern) and HTTP status"
        ).increment()
    }

    private func appCounter(_ name: String, app: String, labels: [(String, String)], help: String) -> Counter {
        let counter = registry.makeCounter(name: name, labels: [("app", app)] + labels, help: help)
        perApp.withLock { counters in
            let key = app.lowercased()
            if !(counters[key] ?? []).contains(where: { $0 === counter }) { counters[key, default: []].append(counter) }
        }
        return counter
    }

    // MARK: Read when scraped

    /// The whole exposition: the counters, then what the scrape read.
    func render(usage: [InstanceUsage], installed: [String], endedCPU: [String: Double]) async -> [UInt8] {
        let now = PrometheusCollectorRegistry()
        now.makeGauge(name: "appd_start_time_seconds", labels: [], help: "When this daemon started (Unix time)")
            .set(startedAt.timeIntervalSince1970)
        now.makeGauge(name: "appd_apps_installed", labels: [], help: "Apps installed")
            .set(Double(installed.count))
        var byState: [InstanceState: Int] = [:]
        for instance in usage { byState[instance.state, default: 0] += 1 }
        for state in InstanceState.allCases where state != .exited && state != .running {
            now.makeGauge(name: "appd_instances", labels: [("state", state.rawValue)],
                help: "Live instances, by state").set(Double(byState[state] ?? 0))
        }
        // Per installed app (label values come from the registry, never from the instances).
        var memory: [String: Int64] = [:]
        var cpu = endedCPU
        var counted: Set<String> = []
        for instance in usage {
            let key = instance.app.lowercased()
            if let bytes = instance.memoryBytes {
                memory[key, default: 0] += bytes
                counted.insert(key)
            }
            if let seconds = instance.cpuSeconds { cpu[key, default: 0] += seconds }
        }
        for app in installed {
            let key = app.lowercased()
            if counted.contains(key) || usage.contains(where: { $0.app.lowercased() == key }) {
                now.makeGauge(name: "appd_app_memory_bytes", labels: [("app", app)],
                    help: "Memory charged to the app's live instances (cgroup memory.current / memory.usage_in_bytes)")
                    .set(Double(memory[key] ?? 0))
            }
            if let seconds = cpu[key] {
                now.makeCounter(name: "appd_app_cpu_seconds_total", labels: [("app", app)],
                    help: "CPU time of the app's instances since this daemon started (cgroup cpu.stat usage_usec)")
                    .increment(by: max(0, seconds))
            }
        }
        if let source = denials.withLock({ $0 }) {
            for (app, count) in await source() where installed.contains(where: { $0.caseInsensitiveCompare(app) == .orderedSame }) {
                now.makeCounter(name: "appd_denials_total", labels: [("app", app)],
                    help: "Operations the sandbox refused, per app").increment(by: Int64(max(0, count)))
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
        case .json(let status, _): status
        case .stream: 200
        }
    }
}
