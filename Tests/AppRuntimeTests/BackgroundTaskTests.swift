import Foundation
import Testing

@testable import AppRuntime

/// beginBackgroundTask / endBackgroundTask against appd's answers, matched by `ref`.
@Suite("background tasks")
@MainActor
struct BackgroundTaskTests {
    @Test("begin sends name and ref; appd's task id is what end sends")
    func beginAndEnd() async throws {
        let harness = try ChannelHarness()
        try await harness.launch()
        let identifier = harness.app.beginBackgroundTask(name: "save")
        #expect(identifier != .invalid)
        let begin = try #require(await harness.daemon.receive())
        #expect(begin["type"] as? String == "beginBackgroundTask")
        #expect(begin["name"] as? String == "save")
        let ref = try #require(begin["ref"] as? Int)
        #expect(ref == identifier.rawValue)
        harness.daemon.send(
            #"{"type":"backgroundTaskBegan","ref":\#(ref),"task":3,"timeRemaining":600.0}"#)
        #expect(await eventually { harness.app.tasks.entries[ref]?.task == 3 })
        harness.app.endBackgroundTask(identifier)
        let end = try #require(await harness.daemon.receive())
        #expect(end["type"] as? String == "endBackgroundTask")
        #expect(end["task"] as? Int == 3)
        #expect(harness.app.backgroundTaskCount == 0)
        harness.app.endBackgroundTask(identifier)  // twice: ignored, nothing sent
        harness.app.endBackgroundTask(.invalid)
        #expect(await harness.daemon.isQuiet())
    }

    @Test("backgroundTaskWillExpire runs that task's handler, which ends it")
    func expiry() async throws {
        let harness = try ChannelHarness()
        try await harness.launch()
        var expired: [String] = []
        var save = BackgroundTaskIdentifier.invalid
        var upload = BackgroundTaskIdentifier.invalid
        save = harness.app.beginBackgroundTask(name: "save") { expired.append("save") }
        upload = harness.app.beginBackgroundTask(name: "upload") {
            expired.append("upload")
            harness.app.endBackgroundTask(upload)
        }
        #expect(save != upload)
        #expect(await harness.daemon.receive()?["ref"] as? Int == save.rawValue)
        #expect(await harness.daemon.receive()?["ref"] as? Int == upload.rawValue)
        // Answers in the other order: matched by ref, not by arrival.
        harness.daemon.send(
            #"{"type":"backgroundTaskBegan","ref":\#(upload.rawValue),"task":8,"timeRemaining":30}"#
        )
        harness.daemon.send(
            #"{"type":"backgroundTaskBegan","ref":\#(save.rawValue),"task":7,"timeRemaining":30}"#)
        harness.daemon.send(#"{"type":"backgroundTaskWillExpire","task":8,"timeRemaining":5.0}"#)
        #expect(await eventually { expired == ["upload"] })
        let end = await harness.daemon.receive()
        #expect(end?["type"] as? String == "endBackgroundTask")
        #expect(end?["task"] as? Int == 8)
        #expect(harness.app.backgroundTaskCount == 1)
        harness.daemon.send(#"{"type":"backgroundTaskWillExpire","task":99}"#)  // unknown: ignored
        try await Task.sleep(nanoseconds: 50_000_000)
        #expect(expired == ["upload"])
    }

    @Test("a refused task (task 0) runs the expiration handler at once and is forgotten")
    func refused() async throws {
        let harness = try ChannelHarness()
        try await harness.launch()
        var expired = 0
        let identifier = harness.app.beginBackgroundTask(name: "x") { expired += 1 }
        _ = await harness.daemon.receive()
        harness.daemon.send(
            #"{"type":"backgroundTaskBegan","ref":\#(identifier.rawValue),"task":0,"reason":"too many"}"#
        )
        #expect(await eventually { expired == 1 })
        #expect(harness.app.backgroundTaskCount == 0)
        #expect(harness.logLines.contains { $0.contains("too many") })
        harness.app.endBackgroundTask(identifier)
        #expect(await harness.daemon.isQuiet())
    }

    @Test("a task ended before appd answered is ended as soon as the answer comes")
    func endedBeforeAnswer() async throws {
        let harness = try ChannelHarness()
        try await harness.launch()
        let identifier = harness.app.beginBackgroundTask(name: "quick")
        _ = await harness.daemon.receive()
        harness.app.endBackgroundTask(identifier)
        #expect(await harness.daemon.isQuiet())
        harness.daemon.send(
            #"{"type":"backgroundTaskBegan","ref":\#(identifier.rawValue),"task":5}"#)
        let end = await harness.daemon.receive()
        #expect(end?["type"] as? String == "endBackgroundTask")
        #expect(end?["task"] as? Int == 5)
        #expect(await eventually { harness.app.backgroundTaskCount == 0 })
    }

    @Test("a task begun inside didFinishLaunching is asked for before ready")
    func duringLaunch() async throws {
        let harness = try ChannelHarness()
        harness.delegate.onLaunch = { _ = harness.app.beginBackgroundTask(name: "warm-up") }
        await harness.startApp()
        harness.daemon.send(#"{"type":"didFinishLaunching"}"#)
        #expect(await harness.daemon.receiveType() == "beginBackgroundTask")
        #expect(await harness.daemon.receiveType() == "ready")
    }
}
