/// Background fetch (docs/lifecycle.md, "Background fetch"), as UIKit's
/// `setMinimumBackgroundFetchInterval` and `application(_:performFetchWithCompletionHandler:)`.
extension Application {
    /// The shortest interval appd allows (its `MinimumFetchInterval` bounds whatever is asked).
    public nonisolated static let backgroundFetchIntervalMinimum: Double = 0
    /// No background fetches (the default).
    public nonisolated static let backgroundFetchIntervalNever: Double = .infinity

    /// Asks appd to wake the app, while it is suspended, at most every `seconds` to fetch
    /// (`AppDelegate.performFetch`). appd bounds the interval (at least
    /// `MinimumFetchInterval`, 60 s by default) and lengthens it when fetches go unanswered;
    /// `backgroundFetchIntervalNever` turns fetches off. Outside appd it does nothing.
    public func setMinimumBackgroundFetchInterval(_ seconds: Double) {
        guard seconds.isFinite else {
            send(.setMinimumBackgroundFetchInterval(seconds: nil))
            return
        }
        send(.setMinimumBackgroundFetchInterval(seconds: max(0, seconds)))
    }

    /// performFetch from appd: the delegate fetches and calls its completion once (later calls
    /// are ignored), which answers appd with the result.
    func performFetch(_ fetch: Int, timeRemaining: Double?, delegate: any AppDelegate) {
        fetchTimeRemaining = timeRemaining
        let answer = FetchAnswer()
        delegate.performFetch { [weak self] result in
            guard !answer.sent else { return }
            answer.sent = true
            self?.fetchTimeRemaining = nil
            self?.send(.fetchCompleted(fetch: fetch, result: result))
        }
    }
}

/// Whether a fetch's completion was called (only the first call answers appd).
@MainActor
private final class FetchAnswer {
    var sent = false
}
