import AppdAPI
import Foundation
import Synchronization

/// Hands every lifecycle event to every subscriber (`GET /v1/events`). A subscriber that reads
/// too slowly loses its oldest undelivered events rather than holding memory for them.
final class EventHub: Sendable {
    private struct State {
        var next = 1
        var subscribers: [UUID: AsyncStream<APIEvent>.Continuation] = [:]
    }

    private let state = Mutex(State())
    static let bufferPerSubscriber = 1024

    func publish(_ make: (Int) -> APIEvent) {
        let (event, targets) = state.withLock { state -> (APIEvent, [AsyncStream<APIEvent>.Continuation]) in
            let event = make(state.next)
            state.next += 1
            return (event, Array(state.subscribers.values))
        }
        for target in targets { target.yield(event) }
    }

    func subscribe() -> AsyncStream<APIEvent> {
        let id = UUID()
        let (stream, continuation) = AsyncStream<APIEvent>.makeStream(
            bufferingPolicy: .bufferingNewest(Self.bufferPerSubscriber))
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        state.withLock { $0.subscribers[id] = continuation }
        return stream
    }

    var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    func finishAll() {
        let targets = state.withLock { state in
            defer { state.subscribers.removeAll() }
            return Array(state.subscribers.values)
        }
        for target in targets { target.finish() }
    }
}
