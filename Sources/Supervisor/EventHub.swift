import AppdAPI
import Foundation
import Synchronization

/// Hands every lifecycle event to every subscriber (`GET /v1/events`) and keeps the most
/// recent ones (at most `ringCount` events and `ringBytes` of their JSON) so that a client that
/// reconnects with the last `seq` it saw gets what it missed (`GET /v1/events?since=SEQ`). A
/// subscriber that reads too slowly loses its oldest undelivered events rather than holding
/// memory for them; the seq numbers it sees then jump, and the API says so with a `gap` event.
public final class EventHub: Sendable {
    private struct State {
        var next = 1
        var subscribers: [UUID: AsyncStream<APIEvent>.Continuation] = [:]
        /// Oldest first, with the size each counts against `ringBytes`.
        var ring: [(event: APIEvent, bytes: Int)] = []
        var ringStart = 0
        var ringBytes = 0
        var observers: [@Sendable (APIEvent) -> Void] = []
    }

    private let state = Mutex(State())
    static let bufferPerSubscriber = 1024
    /// What the ring holds at most. An event is a few hundred bytes; a message event's detail
    /// is bounded by the lifecycle channel's parser.
    public static let ringCount = 4096
    public static let ringBytes = 1 << 20
    let startedAt = Date()

    public init() {}

    func publish(_ make: (Int) -> APIEvent) {
        let (event, targets, observers) = state.withLock {
            state -> (
                APIEvent, [AsyncStream<APIEvent>.Continuation], [@Sendable (APIEvent) -> Void]
            ) in
            let event = make(state.next)
            state.next += 1
            let bytes = Self.size(of: event)
            state.ring.append((event, bytes))
            state.ringBytes += bytes
            while state.ring.count - state.ringStart > Self.ringCount
                || (state.ringBytes > Self.ringBytes && state.ring.count - state.ringStart > 1)
            {
                state.ringBytes -= state.ring[state.ringStart].bytes
                state.ringStart += 1
            }
            // Compact now and then rather than shift the array on every event.
            if state.ringStart > Self.ringCount {
                state.ring.removeFirst(state.ringStart)
                state.ringStart = 0
            }
            return (event, Array(state.subscribers.values), state.observers)
        }
        for observer in observers { observer(event) }
        for target in targets { target.yield(event) }
    }

    /// Called with every event as it is published (the metrics count launches and exits).
    public func observe(_ observer: @escaping @Sendable (APIEvent) -> Void) {
        state.withLock { $0.observers.append(observer) }
    }

    public func subscribe() -> AsyncStream<APIEvent> { subscribe(after: .now).live }

    /// Where a subscriber starts: now, after the event with this seq, or at this time.
    public enum Start: Sendable {
        case now
        case after(seq: Int)
        case time(Date)
    }

    /// The events after `start` that the ring still holds, a `gap` event first when some it no
    /// longer holds were asked for, and the stream of events from then on. Taken under one lock:
    /// nothing is missed or sent twice between the replay and the stream.
    public func subscribe(after start: Start) -> (replay: [APIEvent], live: AsyncStream<APIEvent>) {
        let id = UUID()
        let (stream, continuation) = AsyncStream<APIEvent>.makeStream(
            bufferingPolicy: .bufferingNewest(Self.bufferPerSubscriber))
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        let replay = state.withLock { state -> [APIEvent] in
            state.subscribers[id] = continuation
            let held = state.ring[state.ringStart...].map(\.event)
            let oldest = held.first?.seq ?? state.next
            let newest = state.next - 1
            switch start {
            case .now:
                return []
            case .after(let seq) where seq > newest:
                // A seq this daemon never sent: the client saw another daemon (seq starts at 1
                // with each start).
                return [
                    gap(
                        upTo: oldest - 1,
                        detail:
                            "event \(seq) is newer than any this daemon sent (it started at \(Self.rfc3339(startedAt)) and numbers its events from 1): all it still holds follows"
                    )
                ]
                    + held
            case .after(let seq):
                let missed = seq + 1 < oldest
                let wanted = held.filter { $0.seq > seq }
                guard missed else { return wanted }
                return [
                    gap(
                        upTo: oldest - 1,
                        detail:
                            "events \(seq + 1) to \(oldest - 1) are no longer held (appd keeps the last \(Self.ringCount) events, at most \(Self.ringBytes >> 20) MiB): what follows is all it has"
                    )
                ]
                    + wanted
            case .time(let date):
                let wanted = held.filter { $0.time >= date }
                // Events were dropped from the ring, and the oldest held one is already newer
                // than the time asked for: some of those dropped may have been wanted.
                guard oldest > 1, let first = held.first, first.time > date else { return wanted }
                return [
                    gap(
                        upTo: oldest - 1,
                        detail:
                            "events 1 to \(oldest - 1) are no longer held; the oldest held is from \(Self.rfc3339(first.time)), after \(Self.rfc3339(date))"
                    )
                ]
                    + wanted
            }
        }
        return (replay, stream)
    }

    /// A `gap` event: its seq is the last one missed, so that a client that resumes after it
    /// gets the oldest held event next.
    private func gap(upTo seq: Int, detail: String) -> APIEvent {
        APIEvent(seq: max(0, seq), time: Date(), kind: .gap, app: "", detail: detail)
    }

    /// A gap a slow subscriber made: it read too slowly and lost `from...to`.
    public static func dropped(from: Int, to: Int) -> APIEvent {
        APIEvent(
            seq: to, time: Date(), kind: .gap, app: "",
            detail:
                "events \(from) to \(to) were dropped: this client read more slowly than they came (appd holds at most \(bufferPerSubscriber) undelivered events per client)"
        )
    }

    static func size(of event: APIEvent) -> Int {
        (try? JSONEncoder().encode(event).count) ?? 1024
    }

    static func rfc3339(_ date: Date) -> String { ISO8601DateFormatter().string(from: date) }

    var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    func finishAll() {
        let targets = state.withLock { state in
            defer { state.subscribers.removeAll() }
            return Array(state.subscribers.values)
        }
        for target in targets { target.finish() }
    }
}
