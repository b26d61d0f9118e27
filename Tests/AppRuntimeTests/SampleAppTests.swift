import Foundation
import TestSupport
import Testing

@testable import AppRuntime

/// A sample executable (built next to this test binary) run as its own process, with a fake
/// appd on fd 3 as `APPD_LIFECYCLE_FD`, a scratch data container, and its Examples/ folder as
/// the bundle.
@MainActor
final class SampleProcess {
    let pid: pid_t
    let daemon: FakeDaemon
    private let output: OutputDrain

    init(_ name: String, home: URL, arguments: [String] = []) throws {
        let executable = builtExecutable(name)
        let bundle = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Examples/\(name)").path
        // Every fd made here is close-on-exec and the app gets only 0-3: tests beside this one
        // spawn processes too, and one that inherited the output's write end would keep the
        // output's reader from its EOF until that process exited.
        let (appEnd, daemonEnd) = try seqpacketPair()
        let environment = [
            "APPD_LIFECYCLE_FD=3", "HOME=\(home.path)", "TMPDIR=\(home.path)/tmp/",
            "APPD_BUNDLE_PATH=\(bundle)", "APPD_BUNDLE_ID=com.example.\(name.lowercased())",
            "LANG=C.UTF-8", "PATH=/usr/bin:/bin",
        ]
        // The app's end is the app's alone once it runs, or nobody's if it could not start.
        defer { close(appEnd) }
        do {
            (pid, output) = try spawnDrained(
                executable, arguments: arguments, environment: environment,
                placing: [(child: 3, parent: appEnd)])
        } catch {
            close(daemonEnd)
            throw error
        }
        daemon = FakeDaemon(fd: daemonEnd)
    }

    /// Waits for the exit (at most `timeout` seconds, then SIGKILL); the status and stdout.
    func finish(timeout: Double = 10) async -> (status: Int32, output: String) {
        let deadline = Date().addingTimeInterval(timeout)
        var status: Int32 = 0
        while waitpid(pid, &status, WNOHANG) == 0 {
            if Date() > deadline {
                kill(pid, SIGKILL)
                _ = waitpid(pid, &status, 0)
                break
            }
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
        // The app has exited and nothing else holds the write end: EOF follows at once.
        while !output.isFinished { try? await Task.sleep(nanoseconds: 2_000_000) }
        return (status, output.text)
    }
}

@Suite("sample apps as processes")
@MainActor
struct SampleAppTests {
    @Test(
        "Notes saves on didEnterBackground and willTerminate, and the next launch restores what it saved"
    )
    func notesRelaunch() async throws {
        let home = Scratch()
        for launch in 1...2 {
            let app = try SampleProcess(
                "Notes", home: home.url, arguments: ["-note", "note \(launch)"])
            #expect(await app.daemon.receiveType() == "hello")
            app.daemon.send(
                #"{"type":"didFinishLaunching","instance":"n\#(launch)","state":"inactive"}"#)
            // It asks for background fetches while it launches (every hour by default).
            let fetching = try #require(await app.daemon.receive())
            #expect(fetching["type"] as? String == "setMinimumBackgroundFetchInterval")
            #expect(fetching["interval"] as? Double == 3600)
            #expect(await app.daemon.receiveType() == "ready")
            app.daemon.send(#"{"type":"didBecomeActive"}"#)
            app.daemon.send(#"{"type":"willResignActive"}"#)
            app.daemon.send(#"{"type":"didEnterBackground","gracePeriod":5}"#)
            let begin = try #require(await app.daemon.receive())
            #expect(begin["type"] as? String == "beginBackgroundTask")
            #expect(begin["name"] as? String == "save notes")
            // The save is done before the answer comes: the task ends as soon as it does.
            app.daemon.send(
                #"{"type":"backgroundTaskBegan","ref":\#(begin["ref"] as? Int ?? -1),"task":41}"#)
            let end = await app.daemon.receive()
            #expect(end?["type"] as? String == "endBackgroundTask")
            #expect(end?["task"] as? Int == 41)
            app.daemon.send(#"{"type":"willTerminate","gracePeriod":5}"#)
            let (status, output) = await app.finish()
            #expect(status == 0, "\(output)")
            let lines = output.split(separator: "\n").map(String.init)
            #expect(
                lines.contains(launch == 1 ? "notes: no saved notes" : "notes: restored 1 notes"),
                "\(output)")
            #expect(
                lines.contains("notes: saved \(launch) notes (didEnterBackground)"), "\(output)")
            #expect(lines.contains("notes: saved \(launch) notes (willTerminate)"), "\(output)")
            #expect(lines.contains("notes: attached to appd: yes"), "\(output)")
        }
        let prefs = try Preferences(
            folder: home.url.appendingPathComponent("Library/Preferences"),
            bundleIdentifier: "com.example.notes")
        #expect(prefs.integer(forKey: "launches") == 2)
    }

    @Test("Notes woken for a background fetch adds a note, saves it and answers newData")
    func notesFetch() async throws {
        let home = Scratch()
        let app = try SampleProcess(
            "Notes", home: home.url, arguments: ["-note", "first", "-fetchInterval", "900"])
        #expect(await app.daemon.receiveType() == "hello")
        app.daemon.send(#"{"type":"didFinishLaunching","instance":"f1","state":"inactive"}"#)
        let fetching = try #require(await app.daemon.receive())
        #expect(fetching["interval"] as? Double == 900)
        #expect(await app.daemon.receiveType() == "ready")
        app.daemon.send(#"{"type":"performFetch","fetch":7,"timeRemaining":30}"#)
        let answer = try #require(await app.daemon.receive())
        #expect(answer["type"] as? String == "fetchCompleted")
        #expect(answer["fetch"] as? Int == 7)
        #expect(answer["result"] as? String == "newData")
        app.daemon.send(#"{"type":"willTerminate","gracePeriod":5}"#)
        let (status, output) = await app.finish()
        #expect(status == 0, "\(output)")
        #expect(output.contains("notes: fetched 1 (2 notes)"), "\(output)")
        #expect(output.contains("notes: saved 2 notes (performFetch)"), "\(output)")
    }

    /// Player launched, active for `active` seconds, in the background for `background`
    /// seconds, then sent SIGTERM: its exit status and stdout.
    private func playerSession(tick: String, active: Double, background: Double) async throws
        -> (status: Int32, output: String)
    {
        let home = Scratch()
        let app = try SampleProcess("Player", home: home.url, arguments: ["-TickInterval", tick])
        #expect(await app.daemon.receiveType() == "hello")
        app.daemon.send(#"{"type":"didFinishLaunching","state":"inactive"}"#)
        #expect(await app.daemon.receiveType() == "ready")
        app.daemon.send(#"{"type":"didBecomeActive"}"#)
        try await Task.sleep(nanoseconds: UInt64(active * 1e9))
        app.daemon.send(#"{"type":"willResignActive"}"#)
        app.daemon.send(#"{"type":"didEnterBackground","gracePeriod":5}"#)
        try await Task.sleep(nanoseconds: UInt64(background * 1e9))
        kill(app.pid, SIGTERM)
        return await app.finish()
    }

    @Test("Player keeps ticking in the background and stops on SIGTERM with willTerminate")
    func playerInBackground() async throws {
        let (status, output) = try await playerSession(tick: "0.05", active: 0.2, background: 0.4)
        #expect(status == 0, "\(output)")
        #expect(output.contains("state=active"), "\(output)")
        #expect(output.contains("player: in the background, still playing"), "\(output)")
        let background = output.split(separator: "\n").filter { $0.hasSuffix("state=background") }
        #expect(background.count >= 3, "\(output)")
        #expect(output.contains("player: stopped after"), "\(output)")
    }

    @Test(
        "Player printing far more than a socket buffer holds still hears every message and SIGTERM")
    func playerWithMuchOutput() async throws {
        // About 1,000 lines: an output read only after the exit blocked the app at ~160.
        let (status, output) = try await playerSession(tick: "0.001", active: 1, background: 0.1)
        let lines = output.split(separator: "\n")
        #expect(status == 0, "\(lines.suffix(5))")
        #expect(lines.count > 300, "\(lines.count) lines")
        #expect(lines.contains("player: in the background, still playing"), "\(lines.suffix(5))")
        #expect(lines.last?.hasPrefix("player: stopped after") == true, "\(lines.suffix(5))")
    }
}
