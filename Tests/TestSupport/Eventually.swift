import Foundation

/// Polls `condition` every 50 ms until it holds or `seconds` pass; returns whether it held.
/// For what a loaded machine may delay: a fixed sleep before a check fails there.
public func eventually(_ seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(50_000)
    }
    return try condition()
}
