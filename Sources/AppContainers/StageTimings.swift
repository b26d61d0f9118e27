import Foundation

/// The stages of a request the daemon times (a launch, an install): what the API answers in its
/// `Server-Timing` header and the benchmarks print as the daemon's breakdown.
public protocol StageTimings {
    /// Each stage's name and seconds, in order.
    var stages: [(name: String, seconds: Double)] { get }
}

extension StageTimings {
    /// `Server-Timing` (W3C): `name;dur=MILLISECONDS` entries.
    public var serverTiming: String {
        stages.map { "\($0.name);dur=\(String(format: "%.3f", $0.seconds * 1000))" }
            .joined(separator: ", ")
    }
}

/// A stopwatch for consecutive stages: each `lap()` is the time since the last one (or since it
/// was made).
public struct Laps: Sendable {
    private var clock = ContinuousClock.now

    public init() {}

    public mutating func lap() -> Double {
        let now = ContinuousClock.now
        let elapsed = now - clock
        clock = now
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
}
