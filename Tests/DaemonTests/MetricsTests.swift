import AppdAPI
import AppdClient
import Foundation
import Testing

/// The Prometheus text exposition 0.0.4, read strictly: every line a comment, a HELP, a TYPE or
/// a sample; every sample's family declared by a TYPE before it, once; a family's lines
/// together; no series twice; histograms cumulative with a `+Inf` bucket equal to `_count`.
struct Exposition {
    struct Sample: Hashable {
        var name: String
        var labels: [String: String]
    }

    var types: [String: String] = [:]
    var values: [Sample: Double] = [:]

    struct Invalid: Error, CustomStringConvertible {
        var description: String
    }

    init(_ text: String) throws {
        var family: String?
        var finished: Set<String> = []
        var helps: Set<String> = []
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false)
            .enumerated()
        {
            let line = String(raw)
            let at = "line \(number + 1) '\(line.prefix(120))'"
            if line.isEmpty { continue }
            if line.hasPrefix("# HELP ") || line.hasPrefix("# TYPE ") {
                let parts = line.split(
                    separator: " ", maxSplits: 3, omittingEmptySubsequences: false
                ).map(String.init)
                guard parts.count >= 3, Self.isMetricName(parts[2]) else {
                    throw Invalid(description: "bad comment at \(at)")
                }
                let name = parts[2]
                if parts[1] == "HELP" {
                    guard helps.insert(name).inserted else {
                        throw Invalid(description: "second HELP at \(at)")
                    }
                    continue
                }
                guard parts.count == 4,
                    ["counter", "gauge", "histogram", "summary", "untyped"].contains(parts[3])
                else {
                    throw Invalid(description: "bad TYPE at \(at)")
                }
                guard types[name] == nil else { throw Invalid(description: "second TYPE at \(at)") }
                if let family { finished.insert(family) }
                types[name] = parts[3]
                family = name
                continue
            }
            if line.hasPrefix("#") { continue }
            let (sample, value) = try Self.sample(line, at: at)
            let owner = Self.family(of: sample.name, types: types)
            guard let owner, types[owner] != nil else {
                throw Invalid(description: "sample without a TYPE at \(at)")
            }
            guard owner == family, !finished.contains(owner) else {
                throw Invalid(description: "family \(owner) not contiguous at \(at)")
            }
            guard values.updateValue(value, forKey: sample) == nil else {
                throw Invalid(description: "series twice at \(at)")
            }
        }
        try checkHistograms()
    }

    static func family(of name: String, types: [String: String]) -> String? {
        if types[name] != nil { return name }
        for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) {
            let base = String(name.dropLast(suffix.count))
            if types[base] == "histogram" || types[base] == "summary" { return base }
        }
        return nil
    }

    static func isMetricName(_ text: String) -> Bool {
        guard let first = text.unicodeScalars.first, first.isASCII,
            first.properties.isAlphabetic || first == "_" || first == ":"
        else { return false }
        return text.unicodeScalars.allSatisfy {
            $0.isASCII
                && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_"
                    || $0 == ":")
        }
    }

    static func sample(_ line: String, at: String) throws -> (Sample, Double) {
        var rest = Substring(line)
        let nameEnd = rest.firstIndex { $0 == "{" || $0 == " " } ?? rest.endIndex
        let name = String(rest[..<nameEnd])
        guard isMetricName(name) else { throw Invalid(description: "bad metric name at \(at)") }
        rest = rest[nameEnd...]
        var labels: [String: String] = [:]
        if rest.first == "{" {
            rest = rest.dropFirst()
            while rest.first != "}" {
                guard let equals = rest.firstIndex(of: "=") else {
                    throw Invalid(description: "bad label at \(at)")
                }
                let key = String(rest[..<equals])
                guard isMetricName(key), !key.contains(":") else {
                    throw Invalid(description: "bad label name at \(at)")
                }
                rest = rest[rest.index(after: equals)...]
                guard rest.first == "\"" else {
                    throw Invalid(description: "unquoted label value at \(at)")
                }
                rest = rest.dropFirst()
                var value = ""
                while true {
                    guard let character = rest.first else {
                        throw Invalid(description: "unterminated label value at \(at)")
                    }
                    rest = rest.dropFirst()
                    if character == "\"" { break }
                    if character == "\\" {
                        guard let escaped = rest.first, ["\\", "\"", "n"].contains(escaped) else {
                            throw Invalid(description: "bad escape at \(at)")
                        }
                        value.append(escaped == "n" ? "\n" : escaped)
                        rest = rest.dropFirst()
                    } else {
                        value.append(character)
                    }
                }
                guard labels.updateValue(value, forKey: key) == nil else {
                    throw Invalid(description: "label twice at \(at)")
                }
                if rest.first == "," {
                    rest = rest.dropFirst()
                } else if rest.first != "}" {
                    throw Invalid(description: "bad label list at \(at)")
                }
            }
            rest = rest.dropFirst()
        }
        guard rest.first == " " else { throw Invalid(description: "no value at \(at)") }
        let fields = rest.dropFirst().split(separator: " ", omittingEmptySubsequences: false)
        guard (1...2).contains(fields.count), let value = Self.value(fields[0]),
            fields.count == 1 || Int64(fields[1]) != nil
        else { throw Invalid(description: "bad value at \(at)") }
        return (Sample(name: name, labels: labels), value)
    }

    static func value(_ text: Substring) -> Double? {
        switch text {
        case "+Inf": .infinity
        case "-Inf": -.infinity
        case "NaN": .nan
        default: Double(text)
        }
    }

    func checkHistograms() throws {
        for (name, type) in types where type == "histogram" {
            let buckets = values.filter { $0.key.name == name + "_bucket" }
            let groups = Dictionary(grouping: buckets) { $0.key.labels.filter { $0.key != "le" } }
            for (labels, series) in groups {
                let sorted = try series.map { entry -> (Double, Double) in
                    guard let le = entry.key.labels["le"], let bound = Self.value(Substring(le))
                    else {
                        throw Invalid(description: "\(name) bucket without le")
                    }
                    return (bound, entry.value)
                }.sorted { $0.0 < $1.0 }
                guard sorted.last?.0 == .infinity else {
                    throw Invalid(description: "\(name) has no +Inf bucket")
                }
                guard zip(sorted, sorted.dropFirst()).allSatisfy({ $0.1 <= $1.1 }) else {
                    throw Invalid(description: "\(name) buckets are not cumulative")
                }
                guard values[Sample(name: name + "_count", labels: labels)] == sorted.last?.1,
                    values[Sample(name: name + "_sum", labels: labels)] != nil
                else {
                    throw Invalid(description: "\(name): _count is not the +Inf bucket, or no _sum")
                }
            }
        }
    }

    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        values[Sample(name: name, labels: labels)]
    }

    func series(_ name: String) -> [Sample: Double] { values.filter { $0.key.name == name } }
}

@Suite("GET /v1/metrics and appctl top", .serialized, rootOnly)
struct MetricsTests {
    static func scrape(_ daemon: TestDaemon) throws -> Exposition {
        var text = Data()
        try daemon.client.stream("/v1/metrics") { text.append(contentsOf: $0) }
        return try Exposition(String(decoding: text, as: UTF8.self))
    }

    @Test(
        "the exposition parses strictly, and its values follow installs, launches, exits, memory and CPU"
    )
    func valuesFollowTheDaemon() throws {
        let daemon = try TestDaemon()
        let app = "com.example.metrics"
        let empty = try Self.scrape(daemon)
        #expect(
            empty.types["appd_instances"] == "gauge"
                && empty.types["appd_install_duration_seconds"] == "histogram")
        #expect(empty.value("appd_apps_installed") == 0)
        #expect(empty.value("appd_instances", ["state": "active"]) == 0)
        #expect(empty.series("appd_launches_total").isEmpty)

        try daemon.installProbe(app)
        let installed = try Self.scrape(daemon)
        #expect(installed.value("appd_apps_installed") == 1)
        #expect(installed.value("appd_installs_total", ["result": "ok"]) == 1)
        #expect(installed.value("appd_install_duration_seconds_count") == 1)
        #expect((installed.value("appd_install_duration_seconds_sum") ?? 0) > 0)

        let hog = try daemon.launch(app, ["alloc", "24"])
        let spinner = try daemon.launch(app, ["spin", "2"])
        #expect(
            try daemon.eventually {
                try daemon.logs(hog.id).contains("alloc: value 24 MiB touched")
            })
        usleep(500_000)
        let running = try Self.scrape(daemon)
        let cpuRunning = running.value("appd_app_cpu_seconds_total", ["app": app]) ?? 0
        #expect(cpuRunning > 0.05, "\(running.series("appd_app_cpu_seconds_total"))")
        #expect(running.value("appd_launches_total", ["app": app]) == 2)
        let live = ["inactive", "active", "background"].compactMap {
            running.value("appd_instances", ["state": $0])
        }.reduce(0, +)
        #expect(live == 2, "\(running.series("appd_instances"))")
        #expect(
            (running.value("appd_app_memory_bytes", ["app": app]) ?? 0) >= 24 * 1_048_576,
            "\(running.series("appd_app_memory_bytes"))")

        _ = try daemon.wait(spinner.id)
        let spun = try Self.scrape(daemon)
        #expect(spun.value("appd_exits_total", ["app": app, "reason": "exited"]) == 1)
        // The spinner's CPU stays counted after its cgroup is gone (a counter never goes down).
        // How much it got depends on the machine's load: two busy seconds at most.
        let cpuAfter = spun.value("appd_app_cpu_seconds_total", ["app": app]) ?? 0
        #expect(
            cpuAfter >= cpuRunning && cpuAfter <= 2.5 + cpuRunning, "\(cpuRunning) then \(cpuAfter)"
        )

        _ = try daemon.client.post("/v1/instances/\(hog.id)/kill", as: APIInstance.self)
        _ = try daemon.wait(hog.id)
        let ended = try Self.scrape(daemon)
        #expect(ended.value("appd_exits_total", ["app": app, "reason": "killed"]) == 1)
        #expect(
            ended.value("appd_instances", ["state": "active"]) == 0
                && ended.value("appd_instances", ["state": "inactive"]) == 0)
        #expect(
            ended.series("appd_app_memory_bytes").isEmpty,
            "an app with no live instance has no memory series")
        #expect(
            (ended.value("appd_api_requests_total", ["route": "GET /v1/metrics", "status": "200"])
                ?? 0) >= 4)
        #expect(
            (ended.value(
                "appd_api_requests_total", ["route": "POST /v1/apps/{id}/launch", "status": "201"])
                ?? 0) == 2)
        // No denial yet: no series, never a made-up 0.
        #expect(ended.series("appd_denials_total").isEmpty, "\(ended.series("appd_denials_total"))")
        // The probe's forbidden actions: the counter is the denial log's count for the app, the
        // same number `appctl info` shows, once the kernel's records have come (after the exit).
        let denied = try daemon.launch(app, ["denials", "0"])
        _ = try daemon.wait(denied.id)
        var total = 0.0
        var info: APIApp?
        #expect(
            try daemon.eventually {
                total = try Self.scrape(daemon).value("appd_denials_total", ["app": app]) ?? 0
                info = try daemon.client.get("/v1/apps/\(app)", as: APIApp.self)
                return total > 0 && total == Double(info?.denials ?? -1)
            }, "\(total) vs \(String(describing: info?.denials))")

        // Uninstalled and installed again: its counters go on from where they were, never
        // back to 0 (Prometheus would read that as a restart).
        let before = try Self.scrape(daemon)
        let launches = try #require(before.value("appd_launches_total", ["app": app]))
        let cpu = try #require(before.value("appd_app_cpu_seconds_total", ["app": app]))
        #expect(try daemon.run("appd", ["uninstall", app]).code == 0)
        let gone = try Self.scrape(daemon)
        #expect(gone.value("appd_apps_installed") == 0)
        #expect(gone.series("appd_app_memory_bytes").isEmpty)
        #expect(
            gone.value("appd_launches_total", ["app": app]) == launches, "kept while uninstalled")
        // The same signed bundle again (installProbe made and signed it above).
        let reinstalled = try daemon.run(
            "appd", ["install", "\(daemon.directory)/src-\(app)/Probe.app"])
        #expect(reinstalled.code == 0, "\(reinstalled.output)")
        let again = try daemon.launch(app, ["exit", "0"])
        _ = try daemon.wait(again.id)
        let back = try Self.scrape(daemon)
        #expect(back.value("appd_launches_total", ["app": app]) == launches + 1)
        #expect(back.value("appd_exits_total", ["app": app, "reason": "killed"]) == 1)
        #expect((back.value("appd_app_cpu_seconds_total", ["app": app]) ?? 0) >= cpu)
        #expect((back.value("appd_denials_total", ["app": app]) ?? 0) >= total)
    }

    @Test(
        "attack: nothing an app writes or a client sends becomes a label; the series stay bounded")
    func labelsAreAppdsOwn() throws {
        let daemon = try TestDaemon()
        let app = "com.example.labels"
        try daemon.installProbe(app)
        // A hostile app: garbage on the lifecycle channel and its output, metric-looking lines.
        let hostile = try daemon.launch(
            app, ["attack-channel", "flood", "1", "0", "appd_launches_total{app=\"evil\"} 1e9"])
        let flood = try daemon.launch(app, ["output-flood", "2000"])
        _ = try daemon.wait(flood.id)
        #expect(
            try daemon.eventually { try daemon.logs(hostile.id).contains("attack-channel: value") })
        _ = try daemon.client.post("/v1/instances/\(hostile.id)/kill", as: APIInstance.self)
        _ = try daemon.wait(hostile.id)
        let before = try Self.scrape(daemon)
        // A client asking for 300 paths that do not exist, and with odd methods.
        for index in 0..<300 {
            _ = try? daemon.client.get("/v1/nothing-\(index)", as: APIDaemonInfo.self)
        }
        let after = try Self.scrape(daemon)
        let routes = Set(
            after.series("appd_api_requests_total").keys.compactMap { $0.labels["route"] })
        let known = Set(["unmatched", "invalid"])
        for route in routes where !known.contains(route) {
            #expect(
                route.hasPrefix("GET /v1/") || route.hasPrefix("POST /v1/")
                    || route.hasPrefix("DELETE /v1/"), "\(route)")
            #expect(!route.contains("nothing-"), "a path became a label: \(route)")
        }
        #expect(
            after.value("appd_api_requests_total", ["route": "unmatched", "status": "404"]) == 300)
        // Every app label is the installed id; every reason one of the API's.
        for key in after.values.keys {
            if let label = key.labels["app"] { #expect(label == app, "\(key)") }
            if let reason = key.labels["reason"] {
                #expect(ExitReason(rawValue: reason) != nil, "\(key)")
            }
            if let state = key.labels["state"] {
                #expect(InstanceState(rawValue: state) != nil, "\(key)")
            }
        }
        #expect(
            after.values.count <= before.values.count + 2,
            "\(before.values.count) → \(after.values.count) series")
    }

    @Test("appctl top --once: CPU% and memory per instance; --json for scripts")
    func top() throws {
        let daemon = try TestDaemon()
        let app = "com.example.top"
        try daemon.installProbe(app)
        let spinner = try daemon.launch(app, ["spin", "8"])
        let idle = try daemon.launch(app, ["sleep", "8"])
        usleep(300_000)
        let json = try daemon.run("appctl", ["top", "--json", "--interval", "1"])
        #expect(json.code == 0, "\(json.output)")
        let rows =
            try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [[String: Any]] ?? []
        let byID = Dictionary(
            uniqueKeysWithValues: rows.compactMap { row in (row["id"] as? String).map { ($0, row) }
            })
        let busy = try #require(byID[spinner.id]?["cpuPercent"] as? Double)
        let quiet = try #require(byID[idle.id]?["cpuPercent"] as? Double)
        // The machine may be busy (CI shares its 2 cores): the spinner gets what it gets, the
        // sleeper next to nothing.
        #expect(busy > 1 && busy < 250, "spinner at \(busy)%")
        #expect(quiet < busy / 5, "sleeper at \(quiet)%, spinner at \(busy)%")
        #expect((byID[spinner.id]?["memoryBytes"] as? Int ?? 0) > 0)
        #expect(rows.first?["id"] as? String == spinner.id, "busiest first")

        let text = try daemon.run("appctl", ["top", "--once", "--interval", "0.5", app])
        #expect(text.code == 0)
        let lines = text.output.split(separator: "\n")
        #expect(
            lines.first?.split(separator: " ", omittingEmptySubsequences: true) == [
                "INSTANCE", "APP", "STATE", "CPU%", "MEM", "UPTIME",
            ])
        #expect(lines.count == 3, "\(text.output)")
        let bad = try daemon.run("appctl", ["top", "--once", "--interval", "0"])
        #expect(
            bad.code != 0 && bad.output.contains("--interval takes 0.2 to 60 seconds"),
            "\(bad.output)")
    }
}
