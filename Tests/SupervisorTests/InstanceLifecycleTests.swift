import AppdAPI
import Foundation
import Testing

@testable import Supervisor

/// The lifecycle's rules (docs/lifecycle.md) without a daemon, a cgroup or root: each state and
/// event give the next state and the actions the Supervisor performs, in order.
@Suite("the instance lifecycle as a pure function: state + event → state + actions")
struct InstanceLifecycleTests {
    typealias L = InstanceLifecycle

    static func next(_ state: InstanceState, _ event: L.Event) throws -> L.Transition {
        try L.transition(from: state, on: event)
    }

    @Test("a spawned launcher makes a launching instance inactive, and nothing else")
    func spawned() throws {
        #expect(
            try Self.next(.launching, .spawned)
                == L.Transition(state: .inactive, actions: [.enter(.inactive)]))
        #expect(throws: L.Refusal.self) { try Self.next(.active, .spawned) }
    }

    @Test("activate climbs the ladder one state at a time, telling the app each step")
    func activateClimbs() throws {
        #expect(
            try Self.next(.background, .move(to: .active))
                == L.Transition(
                    state: .active,
                    actions: [.enter(.inactive), .tellApp, .enter(.active), .tellApp]))
        #expect(
            try Self.next(.active, .move(to: .active)) == L.Transition(state: .active, actions: []))
        #expect(
            try Self.next(.running, .move(to: .active))
                == L.Transition(state: .active, actions: [.enter(.active), .tellApp]),
            "an old daemon's running is inactive")
    }

    @Test("a suspended instance is thawed into the background first, its launch watchdog rearmed")
    func suspendedThawsFirst() throws {
        #expect(
            try Self.next(.suspended, .move(to: .active))
                == L.Transition(
                    state: .active,
                    actions: [
                        .thaw, .enter(.background), .rearmLaunchWatchdog, .enter(.inactive),
                        .tellApp,
                        .enter(.active), .tellApp,
                    ]))
        #expect(
            try Self.next(.suspended, .move(to: .background))
                == L.Transition(
                    state: .background, actions: [.thaw, .enter(.background), .rearmLaunchWatchdog])
        )
    }

    @Test("going to the background steps down through inactive")
    func backgroundSteps() throws {
        #expect(
            try Self.next(.active, .move(to: .background))
                == L.Transition(
                    state: .background,
                    actions: [.enter(.inactive), .tellApp, .enter(.background), .tellApp]))
    }

    @Test("a move to a state off the ladder does nothing; an instance off the ladder cannot move")
    func offLadder() throws {
        #expect(
            try Self.next(.active, .move(to: .terminating))
                == L.Transition(state: .active, actions: []))
        for state in [InstanceState.launching, .terminating, .exited] {
            #expect(throws: L.Refusal(state: state, event: .move(to: .active))) {
                try Self.next(state, .move(to: .active))
            }
        }
    }

    @Test("only a background instance is frozen")
    func freezeOnlyBackground() throws {
        #expect(
            try Self.next(.background, .freeze)
                == L.Transition(state: .suspended, actions: [.freeze, .enter(.suspended)]))
        for state in InstanceState.allCases where state != .background {
            #expect(throws: L.Refusal.self) { try Self.next(state, .freeze) }
        }
    }

    @Test(
        "terminate thaws a frozen instance before SIGTERM; kill and the launcher's end need no thaw"
    )
    func terminateAndKill() throws {
        #expect(
            try Self.next(.suspended, .terminate)
                == L.Transition(
                    state: .terminating, actions: [.thaw, .enter(.terminating), .signalTerminate]))
        #expect(
            try Self.next(.active, .terminate)
                == L.Transition(
                    state: .terminating, actions: [.enter(.terminating), .signalTerminate]))
        #expect(
            try Self.next(.suspended, .kill)
                == L.Transition(state: .terminating, actions: [.enter(.terminating), .killCgroup]))
        #expect(
            try Self.next(.terminating, .launcherEnded)
                == L.Transition(state: .exited, actions: [.killCgroup, .enter(.exited)]))
    }

    @Test("an exited instance takes no event: it ends once")
    func exitedIsFinal() {
        for event in [
            L.Event.spawned, .move(to: .active), .freeze, .terminate, .kill, .launcherEnded,
        ] {
            #expect(throws: L.Refusal(state: .exited, event: event)) {
                try Self.next(.exited, event)
            }
        }
    }

    @Test(
        "across a restart: running reads as inactive, the channel is closed, the tasks are gone; an exited one is kept as it was"
    )
    func adoptedLifecycle() {
        var instance = Instance(
            id: "0123456789ab", app: "com.example.life", uid: 2_000_000_001, arguments: [],
            launchedBy: 0, startedAt: Date(timeIntervalSince1970: 1_700_000_000), log: "/x.log",
            state: .running)
        instance.channel = .launching
        instance.backgroundTasks = 3
        let adopted = L.adopted(instance)
        #expect(adopted.state == .inactive)
        #expect(adopted.channel == .closed)
        #expect(adopted.backgroundTasks == 0)
        instance.state = .exited
        instance.channel = .ready
        #expect(L.adopted(instance).channel == .ready, "an exited instance's record is history")
        #expect(L.adopted(instance).backgroundTasks == 3)
    }
}
