import Foundation

/// Polls `condition` every 50 ms until it holds or `seconds` pass; returns whether it held.
/// For what a loaded machine may delay: a fixed sleep before a check fails there. The default is
/// wide (30 s) on purpose: a condition that holds returns at once, so only a failing test waits,
/// and two `swift build`s beside the suite on 2 cores stretched 5 and 10 s waits past their end.
public func eventually(_ seconds: Double = 30, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(50_000)
    }
    return try condition()
}
