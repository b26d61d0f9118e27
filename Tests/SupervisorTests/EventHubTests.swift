import AppdAPI
import Foundation
import Testing

@testable import Supervisor

/// The event ring behind `GET /v1/events?since=` without a daemon: its bounds and what a
/// reconnecting subscriber is handed.
@Suite("the event hub's ring: bounded, replays what it holds, says what it lost")
struct EventHubTests {
    static func publish(_ hub: EventHub, count: Int, detail: String = "", time: Date = Date()) {
        for _ in 0..<count {
            hub.publish {
                APIEvent(
                    seq: $0, time: time, kind: .message, app: "com.example.ring", detail: detail)
            }
        }
    }

    @Test("a subscriber after seq N gets N+1 onwards, with no gap while the ring holds them")
    func replay() {
        let hub = EventHub()
        Self.publish(hub, count: 10)
        let (replay, _) = hub.subscribe(after: .after(seq: 4))
        #expect(replay.map(\.seq) == Array(5...10))
        #expect(hub.subscribe(after: .after(seq: 10)).replay.isEmpty)
        #expect(hub.subscribe(after: .now).replay.isEmpty)
    }

    @Test("past ringCount events: the oldest go, and a gap event names the ones asked for")
    func countBound() {
        let hub = EventHub()
        Self.publish(hub, count: EventHub.ringCount + 500)
        let (replay, _) = hub.subscribe(after: .after(seq: 0))
        #expect(replay.first?.kind == .gap)
        #expect(replay.first?.seq == 500)
        #expect(
            replay.first?.detail?.hasPrefix("events 1 to 500 are no longer held") == true,
            "\(replay.first?.detail ?? "")")
        #expect(replay.count == EventHub.ringCount + 1)
        #expect(replay.dropFirst().map(\.seq) == Array(501...(EventHub.ringCount + 500)))
    }

    @Test("big events: the ring keeps at most ringBytes of them")
    func byteBound() throws {
        let hub = EventHub()
        let detail = String(repeating: "d", count: 4000)
        Self.publish(hub, count: 1000, detail: detail)
        let (replay, _) = hub.subscribe(after: .after(seq: 0))
        let held = replay.filter { $0.kind != .gap }
        let bytes = try held.reduce(0) { $0 + (try JSONEncoder().encode($1).count) }
        #expect(bytes <= EventHub.ringBytes, "\(bytes) bytes held")
        #expect(held.count > 200 && held.count < 1000, "\(held.count) held")
        #expect(replay.first?.kind == .gap)
    }

    @Test(
        "by time: the held events at or after it; a gap when older ones were dropped and might have been wanted"
    )
    func byTime() {
        let hub = EventHub()
        let early = Date(timeIntervalSince1970: 1_000_000)
        let late = Date(timeIntervalSince1970: 2_000_000)
        Self.publish(hub, count: 3, time: early)
        Self.publish(hub, count: 3, time: late)
        let (replay, _) = hub.subscribe(after: .time(late))
        #expect(replay.map(\.seq) == [4, 5, 6])
        let crowded = EventHub()
        Self.publish(crowded, count: EventHub.ringCount + 1, time: late)
        let (lost, _) = crowded.subscribe(after: .time(early))
        #expect(lost.first?.kind == .gap && lost.count == EventHub.ringCount + 1)
    }

    @Test("a seq newer than any sent (another daemon's): a gap, then all that is held")
    func seqFromAnotherDaemon() {
        let hub = EventHub()
        Self.publish(hub, count: 3)
        let (replay, _) = hub.subscribe(after: .after(seq: 9000))
        #expect(
            replay.first?.kind == .gap && replay.first?.detail?.contains("newer than any") == true)
        #expect(replay.dropFirst().map(\.seq) == [1, 2, 3])
    }
}
