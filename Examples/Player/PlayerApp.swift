import AppRuntime
import Foundation

/// The background-audio-style sample: it declares `UIBackgroundModes = [audio]` in its
/// Info.plist, so an admin who allows that mode lets it run on in the background instead of
/// being frozen, and it keeps "playing" — a tick every `TickInterval` seconds (default 1; set
/// it with `-TickInterval 0.2`), each printed with the state the app is in:
/// `player: tick 5 state=background`. A frozen app prints nothing, which is what a test
/// measures.
final class PlayerApp: AppDelegate {
    private var ticks = 0
    private var timer: Timer?

    func didFinishLaunching(options: LaunchOptions) {
        let configured = Preferences.standard.double(forKey: "TickInterval")
        let seconds = configured > 0 ? configured : 1.0
        say("playing, a tick every \(seconds) s")
        // The main run loop runs the timer; AppMain.run keeps that loop going.
        timer = Timer.scheduledTimer(withTimeInterval: seconds, repeats: true) { _ in
            MainActor.assumeIsolated { self.tick() }
        }
    }

    private func tick() {
        ticks += 1
        say("tick \(ticks) state=\(Application.shared.state.rawValue)")
    }

    func didEnterBackground() { say("in the background, still playing") }
    func willEnterForeground() { say("back in the foreground") }
    func didBecomeActive() { say("active") }
    func willResignActive() { say("inactive") }

    func willTerminate() {
        timer?.invalidate()
        say("stopped after \(ticks) ticks")
    }

    private func say(_ line: String) { print("player: \(line)") }
}
