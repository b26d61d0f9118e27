import AppdAPI
import AppdClient
import Foundation
import Testing

/// Background fetch through the real daemon and the real sandboxed probe (`probe lifecycle
/// fetch SECONDS [fetch-silent]`): woken from frozen, told performFetch, frozen again after
/// its answer or its deadline; the schedule kept across a daemon restart.
@Suite("background fetch", .serialized, rootOnly)
struct BackgroundFetchTests {
    @Test(
        "a suspended app is woken for performFetch within its interval and frozen after its answer; one that never answers is frozen at the deadline and woken less often"
    )
    func wokenAndFrozen() throws {
        let daemon = try TestDaemon(
            config: lifecycleConfig("MinimumFetchInterval=1\nFetchDeadline=2\n"))
        try daemon.installProbe("com.example.fetch")
        try daemon.installProbe("com.example.silent")
        let watch = try EventWatch(daemon)
        let answers = try daemon.launch(
            "com.example.fetch", ["lifecycle", "fetch", "1"], background: true)
        let silent = try daemon.launch(
            "com.example.silent", ["lifecycle", "fetch", "1", "fetch-silent"], background: true)
        for instance in [answers, silent] {
            #expect(try daemon.eventually { try daemon.instance(instance.id).nextFetch != nil })
            #expect(
                try daemon.eventually { try daemon.received(instance.id).contains("performFetch") })
        }
        #expect(
            try daemon.eventually {
                try daemon.logs(answers.id).contains("lifecycle: value fetched")
            })
        let events = watch.stop(until: { events in
            events.contains {
                $0.app == "com.example.fetch" && $0.detail?.contains(": newData after") == true
            }
                && events.contains {
                    $0.app == "com.example.silent"
                        && $0.detail?.contains("no answer within FetchDeadline=2 s") == true
                }
        })
        // The answering app: suspended, thawed for the fetch, frozen again once it answered.
        let answered = events.filter { $0.instance == answers.id }
        let states = answered.filter { $0.kind == .state }.compactMap(\.state)
        #expect(
            Array(states.drop(while: { $0 != .suspended }).prefix(3)) == [
                .suspended, .background, .suspended,
            ], "\(states)")
        #expect(answered.contains { $0.detail == "-> performFetch" })
        // Woken within its interval's reach: the first fetch came after the 1 s it asked for,
        // not much later (the timer, not the grace period or a poll, wakes it).
        let asked = try #require(
            answered.first { $0.detail?.hasPrefix("<- setMinimumBackgroundFetchInterval") == true })
        let woken = try #require(answered.first { $0.detail == "-> performFetch" })
        let after = woken.time.timeIntervalSince(asked.time)
        #expect(after >= 0.9 && after < 15, "woken \(after) s after it asked")
        // The silent one: frozen regardless at the deadline, its interval doubled.
        let missed = try #require(events.first { $0.detail?.contains("no answer within") == true })
        #expect(
            missed.detail?.contains("(1 in a row); next in 2 s") == true, "\(missed.detail ?? "")")
        #expect(try daemon.eventually { try daemon.state(silent.id) == .suspended })
        var scraped = Data()
        try daemon.client.stream("/v1/metrics") { scraped.append(contentsOf: $0) }
        let metrics = String(decoding: scraped, as: UTF8.self)
        #expect(
            metrics.contains(
                #"appd_background_fetches_total{app="com.example.fetch",result="newData"}"#))
        #expect(
            metrics.contains(
                #"appd_background_fetches_total{app="com.example.silent",result="missed"}"#))
    }

    @Test("the schedule survives a daemon restart; appctl ps shows the next fetch")
    func acrossRestart() throws {
        let daemon = try TestDaemon(config: lifecycleConfig("MinimumFetchInterval=1\n"))
        try daemon.installProbe("com.example.later")
        let instance = try daemon.launch(
            "com.example.later", ["lifecycle", "fetch", "7200"], background: true)
        #expect(try daemon.eventually { try daemon.instance(instance.id).nextFetch != nil })
        let next = try #require(try daemon.instance(instance.id).nextFetch)
        #expect(abs(next.timeIntervalSinceNow - 7200) < 60)
        daemon.stop()
        try daemon.start()
        let after = try #require(try daemon.instance(instance.id).nextFetch)
        #expect(abs(after.timeIntervalSince(next)) < 1)
        let ps = try daemon.run("appctl", ["ps"])
        #expect(ps.output.contains("fetch in "), "\(ps.output)")
    }
}
