import AppdAPI
import AppdClient
import Foundation
import Testing

/// Issue 15 target 4: running apps cost the daemon nothing until the kernel has something to
/// say. Exits come from pidfds and memory pressure from PSI triggers, both on one epoll thread;
/// the only loops left are a 10 s exit sweep (a safety net) and the `MemoryCheckInterval` tick,
/// which reads one file (the apps' parent cgroup) when a budget is set. These tests make the
/// loops too slow to matter and show that the daemon still notices at once.
@Suite("the daemon learns of exits and memory pressure from the kernel", .serialized, rootOnly)
struct EventDrivenTests {
    @Test(
        "twenty apps that end together are each seen to end within a moment, through their pidfds, not the 10 s sweep; the listing follows"
    )
    func exitsAreEvents() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.brief")
        let watch = try EventWatch(daemon)
        var launched: [APIInstance] = []
        for _ in 0..<20 { launched.append(try daemon.launch("com.example.brief", ["sleep", "2"])) }
        let listed = try daemon.client.get("/v1/instances", as: [APIInstance].self)
        #expect(
            Set(listed.map(\.id)).isSuperset(of: launched.map(\.id)),
            "GET /v1/instances lacks a launch")
        for instance in launched {
            let ended = try daemon.wait(instance.id)
            #expect(ended.exit == APIExit(reason: .exited, code: 0))
            // Two seconds asleep, plus the sandbox's construction. An exit left to the sweep
            // would be seen up to 10 s late: among twenty, some would be.
            let lasted = (ended.endedAt ?? .distantFuture).timeIntervalSince(ended.startedAt)
            #expect(lasted < 4.5, "\(instance.id) was seen to end \(lasted) s after its launch")
        }
        #expect(try daemon.client.get("/v1/instances", as: [APIInstance].self).isEmpty)
        let all = try daemon.client.get("/v1/instances?all=1", as: [APIInstance].self)
        #expect(
            launched.allSatisfy { instance in
                all.contains { $0.id == instance.id && $0.state == .exited }
            })
        let events = watch.stop(until: { $0.filter { $0.kind == .exited }.count >= 20 })
        #expect(events.filter { $0.kind == .exited }.count == 20)
        #expect(
            !events.contains { ($0.detail ?? "").contains("found by the sweep") },
            "an exit reached the daemon only through the sweep")
    }

    @Test(
        "an app that makes the OOM killer end its children in a loop: the memory pressure reaches jetsam through a PSI trigger with no check due for a minute, and the churn costs the daemon little CPU"
    )
    func pressureIsAnEvent() throws {
        let daemon = try TestDaemon(
            config: """
                [Sandbox]
                MemoryMax=32M
                [Lifecycle]
                MemoryPressureWarning=1
                MemoryPressureCritical=0
                MemoryCheckInterval=60
                """)
        try daemon.installProbe("com.example.thrash")
        let pid = try daemon.client.get("/v1/version", as: APIDaemonInfo.self).pid
        let box = EventBox()
        let client = daemon.client
        let reader = Thread {
            try? client.streamLines("/v1/events") { line in
                if let event = try? APICoding.decoder().decode(APIEvent.self, from: line) {
                    box.append(event)
                }
                if box.events.contains(where: Self.isWarning) { throw CancellationError() }
            }
        }
        reader.start()
        usleep(300_000)
        let before = Self.cpuTicks(pid: pid)
        let started = Date()
        // Each round a child grows until the OOM killer ends it: ~30 ms of memory stall a round.
        let thrash = try daemon.launch("com.example.thrash", ["oom-loop", "100000"])
        let warned = daemon.eventually(30) { box.events.contains(where: Self.isWarning) }
        let elapsed = Date().timeIntervalSince(started)
        let used = Double(Self.cpuTicks(pid: pid) - before) / Double(sysconf(Int32(_SC_CLK_TCK)))
        _ = try daemon.client.post("/v1/instances/\(thrash.id)/kill", as: APIInstance.self)
        #expect(
            try daemon.wait(thrash.id).exit?.reason == .killed, "the app did not churn until killed"
        )
        #expect(
            warned, "no memory warning within \(elapsed) s although MemoryCheckInterval is 60 s")
        let warning = box.events.first(where: Self.isWarning)
        #expect(warning?.detail?.contains("memory pressure some") == true)
        print(
            "oom-loop: \(warned ? "warned" : "not warned") after \(String(format: "%.1f", elapsed)) s; \(String(format: "%.2f", used)) s of daemon CPU"
        )
        #expect(
            used < elapsed * 0.25,
            "the daemon used \(used) s of CPU over \(elapsed) s of an app's OOM churn")
        try daemon.expectStillWorks("oom-loop")
    }

    static func isWarning(_ event: APIEvent) -> Bool {
        event.kind == .message && (event.detail ?? "").hasPrefix("memory warning")
    }

    /// utime + stime of every thread of `pid`, in clock ticks.
    static func cpuTicks(pid: Int32) -> Int {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
    }
}
