import AppdAPI
import AppdConfig
import Foundation
import Testing

@testable import Supervisor

/// The lifecycle's decisions (LifecycleController), without an actor, a process or a clock.
@Suite("the lifecycle controller")
struct LifecycleControllerTests {
    static func controller(_ change: (inout LifecycleSettings) -> Void = { _ in })
        -> LifecycleController
    {
        var settings = LifecycleSettings()
        settings.backgroundGracePeriod = 5
        settings.maxBackgroundTasks = 2
        change(&settings)
        return LifecycleController(settings: settings)
    }

    static func instance(_ state: InstanceState, channel: ChannelState? = .ready) -> Instance {
        var entry = Instance(
            id: "0a0b0c0d0e0f", app: "com.example.app", uid: 60_001, arguments: [],
            launchedBy: 1000, startedAt: Date(timeIntervalSince1970: 0), log: "/dev/null",
            state: state)
        entry.channel = channel
        return entry
    }

    @Test("each ladder step is one message, up and down; the grace period only when it may freeze")
    func messages() {
        let controller = Self.controller()
        let up = controller.messages(told: .background, to: .active, neverFrozen: false)
        #expect(up.map(\.type) == [.willEnterForeground, .didBecomeActive])
        let down = controller.messages(told: .active, to: .background, neverFrozen: false)
        #expect(down.map(\.type) == [.willResignActive, .didEnterBackground])
        #expect(down.last?.fields[.gracePeriod] as? Double == 5)
        let service = controller.messages(told: .inactive, to: .background, neverFrozen: true)
        #expect(service.map(\.type) == [.didEnterBackground])
        #expect(service.last?.fields[.gracePeriod] == nil)
        // Told already, or off the ladder: nothing to say.
        #expect(controller.messages(told: .active, to: .active, neverFrozen: false).isEmpty)
        #expect(controller.messages(told: .background, to: .suspended, neverFrozen: false).isEmpty)
        #expect(controller.messages(told: .inactive, to: .exited, neverFrozen: false).isEmpty)
    }

    @Test("the grace period freezes a background instance once over, and nothing that holds it")
    func freezeDue() {
        let controller = Self.controller()
        let since = Date(timeIntervalSince1970: 1000)
        var entry = Self.instance(.background)
        entry.life.backgroundSince = since
        #expect(!controller.freezeDue(entry, now: since.addingTimeInterval(4.9)))
        #expect(controller.freezeDue(entry, now: since.addingTimeInterval(5)))
        var launching = entry
        launching.channel = .launching
        #expect(!controller.freezeDue(launching, now: since.addingTimeInterval(60)))
        var holding = entry
        holding.life.tasks[1] = BackgroundTask(name: "upload", deadline: since)
        #expect(!controller.freezeDue(holding, now: since.addingTimeInterval(60)))
        var audio = entry
        audio.backgroundModes = ["audio"]
        #expect(!controller.freezeDue(audio, now: since.addingTimeInterval(60)))
        var service = entry
        service.service = true
        #expect(!controller.freezeDue(service, now: since.addingTimeInterval(60)))
        var active = entry
        active.state = .active
        #expect(!controller.freezeDue(active, now: since.addingTimeInterval(60)))
        var untold = entry
        untold.life.backgroundSince = nil
        #expect(!controller.freezeDue(untold, now: since.addingTimeInterval(60)))
    }

    @Test("the launch watchdog ends an app between hello and ready, unless frozen or ending")
    func watchdog() {
        #expect(LifecycleController.watchdogEnds(Self.instance(.inactive, channel: .launching)))
        #expect(!LifecycleController.watchdogEnds(Self.instance(.inactive, channel: .ready)))
        #expect(!LifecycleController.watchdogEnds(Self.instance(.inactive, channel: .silent)))
        #expect(!LifecycleController.watchdogEnds(Self.instance(.suspended, channel: .launching)))
        #expect(!LifecycleController.watchdogEnds(Self.instance(.terminating, channel: .launching)))
        #expect(!LifecycleController.watchdogEnds(Self.instance(.exited, channel: .launching)))
    }

    @Test("background tasks: numbered, bounded by MaxBackgroundTasks, refused while terminating")
    func tasks() {
        let controller = Self.controller { $0.backgroundTaskTime = 30 }
        let now = Date(timeIntervalSince1970: 0)
        var entry = Self.instance(.background)
        #expect(
            controller.beginTask(&entry, name: "a", seconds: nil, now: now)
                == .granted(task: 1, seconds: 30))
        let second = controller.beginTask(&entry, name: "b", seconds: 10, now: now)
        #expect(second.isGranted)
        #expect(entry.backgroundTasks == 2)
        let third = controller.beginTask(&entry, name: "c", seconds: nil, now: now)
        #expect(
            third == .refused("it holds 2 background tasks already (MaxBackgroundTasks)"))
        #expect(!third.isGranted)
        var ending = Self.instance(.terminating)
        #expect(
            controller.beginTask(&ending, name: "a", seconds: nil, now: now)
                == .refused("the app is terminating"))
        #expect(ending.life.tasks.isEmpty)
    }

    @Test("an expired task is warned once; one held while frozen is dropped")
    func expiry() {
        let controller = Self.controller { $0.backgroundTaskExpirationGrace = 3 }
        var entry = Self.instance(.background)
        _ = controller.beginTask(&entry, name: "a", seconds: nil, now: Date())
        #expect(controller.taskExpired(&entry, task: 1) == .warn(grace: 3))
        #expect(controller.taskExpired(&entry, task: 1) == nil)
        #expect(controller.taskExpired(&entry, task: 9) == nil)
        var frozen = Self.instance(.suspended)
        _ = controller.beginTask(&frozen, name: "a", seconds: nil, now: Date())
        #expect(controller.taskExpired(&frozen, task: 1) == .dropped)
        #expect(frozen.life.tasks.isEmpty && frozen.backgroundTasks == 0)
    }

    @Test(
        "an overdue task kills a background app (or expires, ExpiredBackgroundTask=suspend); in the foreground it just ends"
    )
    func overdue() {
        let kill = Self.controller()
        var entry = Self.instance(.background)
        _ = kill.beginTask(&entry, name: "sync", seconds: nil, now: Date())
        #expect(
            kill.taskOverdue(&entry, task: 1)
                == .kill(
                    message:
                        "background task 1 'sync' was not ended in time (BackgroundTaskTime, then BackgroundTaskExpirationGrace)"
                ))
        #expect(kill.taskOverdue(&entry, task: 1) == nil)
        let freeze = Self.controller { $0.expiredTaskAction = .suspend }
        var other = Self.instance(.background)
        _ = freeze.beginTask(&other, name: "sync", seconds: nil, now: Date())
        #expect(
            freeze.taskOverdue(&other, task: 1)
                == .expired(detail: "background task 1 'sync' expired"))
        var active = Self.instance(.active)
        _ = kill.beginTask(&active, name: "sync", seconds: nil, now: Date())
        #expect(kill.taskOverdue(&active, task: 1) == .ended)
        #expect(active.life.tasks.isEmpty)
    }
}
