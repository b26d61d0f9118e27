import AppdAPI
import AppdClient
import Foundation
import Testing

/// `[Lifecycle]` for these tests: short times, and no warnings from the machine's own memory
/// pressure (other builds run beside the tests), so every event an app gets is the test's doing.
func lifecycleConfig(_ extra: String = "") -> String {
    "[Lifecycle]\nMemoryPressureWarning=0\nMemoryPressureCritical=0\nBackgroundGracePeriod=0.5\n"
        + extra
}

extension TestDaemon {
    @discardableResult
    func act(_ action: String, _ iid: String) throws -> APIInstance {
        try client.post("/v1/instances/\(iid)/\(action)", as: APIInstance.self)
    }

    func launch(_ id: String, _ arguments: [String], background: Bool) throws -> APIInstance {
        try client.post(
            "/v1/apps/\(id)/launch",
            body: LaunchRequest(arguments: arguments, background: background), as: APIInstance.self)
    }

    /// The lifecycle messages the probe printed, in order (`lifecycle: event TYPE at NS JSON`).
    func received(_ iid: String) throws -> [String] {
        try logs(iid).split(separator: "\n").compactMap { line in
            guard line.hasPrefix("lifecycle: event ") else { return nil }
            return line.dropFirst("lifecycle: event ".count).split(separator: " ").first.map(
                String.init)
        }
    }

    func state(_ iid: String) throws -> InstanceState { try instance(iid).state }
}

/// `appctl events --json --since 0`, run for the length of a test: what a user watching would
/// see. `--since 0` replays what the daemon holds when appctl connects, so an event published
/// before its stream began (appctl slow to start on a loaded machine) is not missed.
final class EventWatch {
    private let child: DrainedChild

    init(_ daemon: TestDaemon) throws {
        child = try DrainedChild(
            builtExecutable("appctl"), arguments: ["events", "--json", "--since", "0"],
            environment: ["APPD_ROOT=\(daemon.root)"])
    }

    /// Stops it once what it printed satisfies `done` (at most 20 s: a test whose events never
    /// come then fails on what did) and returns every event it printed. An event reaches the
    /// stream after the API answered the request that caused it: a fixed wait lost the last
    /// ones under load.
    func stop(until done: ([APIEvent]) -> Bool) -> [APIEvent] {
        Self.decode(child.stop { done(Self.decode($0)) })
    }

    static func decode(_ data: Data) -> [APIEvent] {
        data.split(separator: 0x0A).compactMap {
            try? APICoding.decoder().decode(APIEvent.self, from: Data($0))
        }
    }
}

@Suite("the app lifecycle", .serialized, rootOnly)
struct LifecycleTests {
    @Test(
        "the state machine: launch, activate, background, freeze, resume, terminate; the app is told each step and appctl events shows each"
    )
    func stateMachine() throws {
        let daemon = try TestDaemon(config: lifecycleConfig())
        try daemon.installProbe("com.example.life")
        let watch = try EventWatch(daemon)
        let first = try daemon.launch("com.example.life", ["lifecycle"])
        #expect(first.state == .active)
        #expect(try daemon.eventually { try daemon.instance(first.id).channel == .ready })
        #expect(
            try daemon.eventually {
                try daemon.received(first.id) == ["didFinishLaunching", "didBecomeActive"]
            })
        let log = try daemon.logs(first.id)
        #expect(log.contains("\"arguments\":[\"lifecycle\"]"))
        #expect(log.contains("\"launchedBy\":{\"uid\":0,\"user\":\"root\"}"))

        // A second launch takes the foreground (ActivePolicy=single): the first resigns, goes
        // to the background and is frozen after the grace period (the events at the end show
        // background before suspended: a check of the state here would race the 0.5 s).
        let second = try daemon.launch("com.example.life", ["lifecycle"])
        #expect(second.state == .active)
        #expect(try daemon.eventually { try daemon.state(first.id) == .suspended })

        // Activated again: thawed, told it comes to the foreground; the second goes back (and
        // is frozen in its turn). What the first was told while it went away it may have read
        // only now: on a loaded machine 0.5 s can pass before it runs.
        #expect(try daemon.act("activate", first.id).state == .active)
        #expect(
            try daemon.eventually {
                try daemon.received(first.id) == [
                    "didFinishLaunching", "didBecomeActive", "willResignActive",
                    "didEnterBackground",
                    "willEnterForeground", "didBecomeActive",
                ]
            })
        #expect(try daemon.logs(first.id).contains("\"gracePeriod\":0.5"))
        #expect([.background, .suspended].contains(try daemon.state(second.id)))

        // background → frozen; resume brings it back as the active app.
        #expect(try daemon.act("background", first.id).state == .background)
        #expect(try daemon.eventually { try daemon.state(first.id) == .suspended })
        #expect(try daemon.act("resume", first.id).state == .active)
        // appctl suspend: to the background and frozen at once.
        #expect(try daemon.act("suspend", first.id).state == .suspended)
        #expect(try daemon.act("activate", first.id).state == .active)

        // Termination: willTerminate on the channel with SIGTERM.
        _ = try daemon.client.post(
            "/v1/instances/\(first.id)/terminate", body: TerminateRequest(grace: 5),
            as: APIInstance.self)
        let ended = try daemon.wait(first.id)
        #expect(ended.exit?.reason == .terminated)
        #expect(try daemon.received(first.id).last == "willTerminate")
        #expect(
            try daemon.received(first.id) == [
                "didFinishLaunching", "didBecomeActive", "willResignActive", "didEnterBackground",
                "willEnterForeground", "didBecomeActive", "willResignActive", "didEnterBackground",
                "willEnterForeground", "didBecomeActive", "willResignActive", "didEnterBackground",
                "willEnterForeground", "didBecomeActive", "willTerminate",
            ])

        let states = watch.stop(until: {
            $0.contains { $0.instance == first.id && $0.kind == .exited }
        }).filter { $0.instance == first.id && ($0.kind == .state || $0.kind == .launched) }
            .compactMap(\.state)
        #expect(
            states == [
                .inactive, .active, .inactive, .background, .suspended,
                .background, .inactive, .active,
                .inactive, .background, .suspended, .background, .inactive, .active,
                .inactive, .background, .suspended, .background, .inactive, .active,
                .terminating,
            ])
    }

    @Test("ActivePolicy=all: every launched app is active; only appctl background sends one away")
    func everyAppActive() throws {
        let daemon = try TestDaemon(config: lifecycleConfig("ActivePolicy=all\n"))
        try daemon.installProbe("com.example.server")
        let one = try daemon.launch("com.example.server", ["sleep", "60"])
        let two = try daemon.launch("com.example.server", ["sleep", "60"])
        usleep(800_000)
        #expect(try daemon.state(one.id) == .active)
        #expect(try daemon.state(two.id) == .active)
        try daemon.act("background", one.id)
        #expect(try daemon.eventually { try daemon.state(one.id) == .suspended })
        #expect(try daemon.state(two.id) == .active)
    }

    @Test(
        "a background task keeps the app running until it ends it, then it is frozen; one held past its time expires"
    )
    func backgroundTasks() throws {
        let daemon = try TestDaemon(
            config: lifecycleConfig(
                "BackgroundGracePeriod=0.5\nBackgroundTaskTime=5\nBackgroundTaskExpirationGrace=1\n"
            ))
        try daemon.installProbe("com.example.tasks")
        // Ends its task after 2.5 s, well within the 5 s it gets (slack for a loaded machine).
        let inTime = try daemon.launch(
            "com.example.tasks", ["lifecycle", "task", "2.5"], background: true)
        // Never ends it: warned at 5 s, killed 1 s later.
        let late = try daemon.launch(
            "com.example.tasks", ["lifecycle", "task", "60"], background: true)
        // Ends it only when warned: then frozen like any app.
        let warned = try daemon.launch(
            "com.example.tasks", ["lifecycle", "task", "60", "end-on-expire"], background: true)
        #expect(
            try daemon.eventually { try daemon.received(inTime.id).contains("backgroundTaskBegan") }
        )
        #expect(try daemon.instance(inTime.id).backgroundTasks == 1)
        for instance in [late, warned] {
            #expect(
                try daemon.eventually {
                    try daemon.received(instance.id).contains("backgroundTaskBegan")
                })
        }
        // The task held it past the grace period: it was frozen only once it ended the task,
        // 2.5 s after it began it (not at 0.5 s). Read from when it was frozen, not from a
        // look at its state at some moment, which a loaded machine could delay past the 2.5 s.
        #expect(try daemon.eventually { try daemon.state(inTime.id) == .suspended })
        let frozen = try daemon.instance(inTime.id)
        let heldFor = (frozen.stateSince ?? .distantPast).timeIntervalSince(frozen.startedAt)
        #expect(heldFor >= 2.5, "frozen \(heldFor) s after its launch, while its task ran")
        #expect((frozen.backgroundTasks ?? 0) == 0)

        let expired = try daemon.wait(late.id)
        #expect(expired.exit?.reason == .backgroundTaskExpired)
        #expect(expired.exit?.message?.contains("'save'") == true)
        #expect(try daemon.received(late.id).contains("backgroundTaskWillExpire"))

        #expect(try daemon.eventually { try daemon.state(warned.id) == .suspended })
        #expect(try daemon.received(warned.id).contains("backgroundTaskWillExpire"))
        #expect(try daemon.instance(warned.id).exit == nil)

        // What the first printed as it ended its task: read once it has ended, since its output
        // relay is in its cgroup and was frozen with it, perhaps before it wrote the line.
        _ = try daemon.client.post(
            "/v1/instances/\(inTime.id)/terminate", body: TerminateRequest(grace: 5),
            as: APIInstance.self)
        #expect(try daemon.wait(inTime.id).exit?.reason == .terminated)
        #expect(try daemon.logs(inTime.id).contains("lifecycle: value ended task 1"))
        #expect(!(try daemon.received(inTime.id).contains("backgroundTaskWillExpire")))
    }

    @Test("an app frozen in the background uses no CPU; activated, it runs again")
    func frozenUsesNoCPU() throws {
        let daemon = try TestDaemon(config: lifecycleConfig())
        try daemon.installProbe("com.example.busy")
        let instance = try daemon.launch("com.example.busy", ["lifecycle", "spin"])
        let cgroup = try #require(instance.cgroup)
        #expect(try daemon.eventually { try daemon.instance(instance.id).channel == .ready })
        try daemon.act("background", instance.id)
        #expect(try daemon.eventually { try daemon.state(instance.id) == .suspended })
        let frozenAt = cpuTicks(cgroup: cgroup)
        usleep(1_000_000)
        #expect(cpuTicks(cgroup: cgroup) - frozenAt <= 1)
        try daemon.act("activate", instance.id)
        // It spins again: 30 ticks come within a second on an idle machine, later on a loaded one.
        let thawedAt = cpuTicks(cgroup: cgroup)
        #expect(daemon.eventually { cpuTicks(cgroup: cgroup) - thawedAt >= 30 })
    }

    @Test(
        "an app that declares an allowed UIBackgroundModes value keeps running in the background; a refused one does not"
    )
    func backgroundModes() throws {
        let daemon = try TestDaemon(config: lifecycleConfig("AllowedBackgroundModes=audio\n"))
        let modes = { (mode: String) in
            "<key>UIBackgroundModes</key><array><string>\(mode)</string></array>"
        }
        try daemon.installProbe("com.example.audio", info: modes("audio"))
        try daemon.installProbe("com.example.fetch", info: modes("fetch"))
        let audio = try daemon.launch("com.example.audio", ["lifecycle", "spin"], background: true)
        let fetch = try daemon.launch("com.example.fetch", ["lifecycle"], background: true)
        #expect(audio.backgroundModes == ["audio"])
        #expect(fetch.backgroundModes == [])
        #expect(try daemon.eventually { try daemon.state(fetch.id) == .suspended })
        #expect(try daemon.state(audio.id) == .background)
        let cgroup = try #require(audio.cgroup)
        let before = cpuTicks(cgroup: cgroup)
        #expect(daemon.eventually { cpuTicks(cgroup: cgroup) - before >= 30 })
        #expect(try daemon.state(audio.id) == .background)
    }

    @Test(
        "the launch watchdog kills an app that said hello but not ready in time; a ready one lives on"
    )
    func watchdog() throws {
        let daemon = try TestDaemon(config: lifecycleConfig("LaunchWatchdog=1\n"))
        try daemon.installProbe("com.example.slow")
        let started = Date()
        let slow = try daemon.launch("com.example.slow", ["lifecycle", "no-ready"])
        let fine = try daemon.launch("com.example.slow", ["lifecycle"], background: false)
        let ended = try daemon.wait(slow.id)
        #expect(ended.exit?.reason == .launchWatchdog)
        #expect(ended.exit?.signal == SIGKILL)
        // Without the watchdog it would run on: any bound shows it; 10 s leaves room for a
        // loaded machine's slow start.
        #expect(Date().timeIntervalSince(started) < 10)
        #expect(try daemon.eventually { try daemon.instance(fine.id).channel == .ready })
        usleep(500_000)
        #expect(try daemon.instance(fine.id).exit == nil)
    }

    @Test(
        "a plain C program without the channel launches, is frozen in the background, and ends by SIGTERM alone"
    )
    func plainProgram() throws {
        let daemon = try TestDaemon(config: lifecycleConfig())
        try daemon.installProbe("com.example.plain")
        let instance = try daemon.launch("com.example.plain", ["spin", "60"])
        #expect(instance.state == .active)
        try daemon.act("background", instance.id)
        #expect(try daemon.eventually { try daemon.state(instance.id) == .suspended })
        let cgroup = try #require(instance.cgroup)
        let frozenAt = cpuTicks(cgroup: cgroup)
        usleep(1_000_000)
        #expect(cpuTicks(cgroup: cgroup) - frozenAt <= 1)
        #expect(try daemon.instance(instance.id).channel == .silent)
        _ = try daemon.client.post(
            "/v1/instances/\(instance.id)/terminate", body: TerminateRequest(grace: 5),
            as: APIInstance.self)
        let ended = try daemon.wait(instance.id)
        #expect(ended.exit == APIExit(reason: .terminated, signal: SIGTERM))
        #expect(try daemon.received(instance.id).isEmpty)
    }

    @Test("a protocol error closes the channel: the app is a plain program from then on")
    func protocolError() throws {
        let daemon = try TestDaemon(config: lifecycleConfig())
        try daemon.installProbe("com.example.garbage")
        let instance = try daemon.launch("com.example.garbage", ["lifecycle", "garbage"])
        #expect(try daemon.eventually { try daemon.instance(instance.id).channel == .closed })
        #expect(
            try daemon.eventually {
                try daemon.logs(instance.id).contains("lifecycle: value channel closed")
            })
        #expect(try daemon.instance(instance.id).exit == nil)
    }

    @Test("memory-warning reaches every app on the channel, not the frozen ones")
    func memoryWarning() throws {
        let daemon = try TestDaemon(config: lifecycleConfig("ActivePolicy=all\n"))
        try daemon.installProbe("com.example.warn")
        let awake = try daemon.launch("com.example.warn", ["lifecycle"])
        let frozen = try daemon.launch("com.example.warn", ["lifecycle"])
        let plain = try daemon.launch("com.example.warn", ["sleep", "60"])
        for instance in [awake, frozen] {
            #expect(try daemon.eventually { try daemon.instance(instance.id).channel == .ready })
        }
        try daemon.act("suspend", frozen.id)
        let answer = try daemon.client.post("/v1/memory-warning", as: APIMemoryWarning.self)
        #expect(answer.delivered == [awake.id])
        #expect(
            try daemon.eventually {
                try daemon.received(awake.id).contains("didReceiveMemoryWarning")
            })
        #expect(!(try daemon.received(frozen.id).contains("didReceiveMemoryWarning")))
        #expect(try daemon.instance(plain.id).channel == .silent)
    }
}
