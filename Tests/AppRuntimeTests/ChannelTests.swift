import Foundation
import Testing

@testable import AppRuntime

/// AppMain's half of docs/lifecycle.md, against a fake daemon on a real SOCK_SEQPACKET pair.
@Suite("lifecycle channel")
@MainActor
struct ChannelTests {
    @Test("hello first; didFinishLaunching reaches the delegate; ready only after it returns")
    func launchOrder() async throws {
        let harness = try ChannelHarness()
        var pendingDuringLaunch: Bool?
        harness.delegate.onLaunch = { pendingDuringLaunch = harness.daemon.hasPending }
        try await harness.launch()
        #expect(harness.delegate.events == ["didFinishLaunching"])
        #expect(pendingDuringLaunch == false, "ready was sent before didFinishLaunching returned")
        let options = try #require(harness.delegate.options)
        #expect(options.instance == "i-1")
        #expect(options.arguments == ["--x"])
        #expect(options.launchedBy == .init(uid: 1000, user: "ada"))
        #expect(options.state == .inactive)
        #expect(options.isAttachedToDaemon)
        #expect(harness.app.state == .inactive)
    }

    @Test("nothing reaches the delegate before didFinishLaunching, and nothing is sent but hello")
    func nothingBeforeLaunch() async throws {
        let harness = try ChannelHarness()
        await harness.startApp()
        harness.daemon.send(#"{"type":"didBecomeActive"}"#)
        harness.daemon.send(#"{"type":"backgroundTaskWillExpire","task":1}"#)
        #expect(await eventually { harness.logLines.count == 2 })
        #expect(harness.delegate.events.isEmpty)
        #expect(await harness.daemon.isQuiet())
        harness.daemon.send(#"{"type":"didFinishLaunching","state":"inactive"}"#)
        #expect(await harness.daemon.receiveType() == "ready")
        #expect(harness.delegate.events == ["didFinishLaunching"])
        #expect(harness.logLines.allSatisfy { $0.contains("before didFinishLaunching") })
    }

    @Test("each lifecycle event reaches the delegate in order and moves the state")
    func events() async throws {
        let harness = try ChannelHarness()
        try await harness.launch()
        var states: [ApplicationState] = []
        for event in [
            #"{"type":"didBecomeActive"}"#, #"{"type":"willResignActive"}"#,
            #"{"type":"didEnterBackground","gracePeriod":5.0}"#, #"{"type":"willEnterForeground"}"#,
            #"{"type":"didBecomeActive"}"#, #"{"type":"didReceiveMemoryWarning"}"#,
        ] {
            let before = harness.delegate.events.count
            harness.daemon.send(event)
            #expect(await eventually { harness.delegate.events.count == before + 1 })
            states.append(harness.app.state)
        }
        #expect(
            harness.delegate.events == [
                "didFinishLaunching", "didBecomeActive", "willResignActive", "didEnterBackground",
                "willEnterForeground", "didBecomeActive", "didReceiveMemoryWarning",
            ])
        #expect(states == [.active, .inactive, .background, .inactive, .active, .active])
        #expect(harness.app.backgroundGracePeriod == 5.0)
        #expect(harness.exitCodes.isEmpty)
    }

    @Test("launched into the background, the app starts in the background state")
    func launchedIntoBackground() async throws {
        let harness = try ChannelHarness()
        try await harness.launch(
            #"{"type":"didFinishLaunching","state":"background","future":{"x":1}}"#)
        #expect(harness.app.state == .background)
        #expect(harness.delegate.options?.arguments == [])
        #expect(harness.delegate.options?.launchedBy == nil)
    }

    @Test("willTerminate runs the delegate once, then exits 0, however many times it is asked")
    func terminate() async throws {
        let harness = try ChannelHarness()
        try await harness.launch()
        harness.daemon.send(#"{"type":"willTerminate","gracePeriod":5.0}"#)
        #expect(await eventually { harness.exitCodes == [0] })
        harness.app.terminate()  // the SIGTERM that follows at once
        harness.daemon.send(#"{"type":"didBecomeActive"}"#)
        try await Task.sleep(nanoseconds: 100_000_000)
        #expect(harness.delegate.events == ["didFinishLaunching", "willTerminate"])
        #expect(harness.exitCodes == [0])
    }

    @Test(
        "malformed messages are logged and ignored; unknown types silently; the channel keeps working"
    )
    func malformedInput() async throws {
        let harness = try ChannelHarness()
        try await harness.launch()
        harness.daemon.send("not json")
        harness.daemon.send("[1,2]")
        harness.daemon.send(#"{"no":"type"}"#)
        harness.daemon.send(#"{"type":5}"#)
        harness.daemon.send(#"{"type":"backgroundTaskBegan","task":3}"#)
        harness.daemon.send(bytes: [UInt8](repeating: 0x20, count: 70_000))
        harness.daemon.send(bytes: [0xFF, 0xFE, 0x00])
        harness.daemon.send(#"{"type":"fromTheFuture","x":[1,2]}"#)
        harness.daemon.send(#"{"type":"didBecomeActive","extra":true}"#)
        #expect(await eventually { harness.delegate.events.last == "didBecomeActive" })
        #expect(harness.logLines.count == 7, "\(harness.logLines)")
        #expect(harness.logLines.allSatisfy { $0.hasPrefix("ignored a malformed message") })
        #expect(harness.logLines.contains { $0.contains("over the limit") })
        #expect(harness.app.isAttachedToDaemon)
    }

    @Test("when appd closes the channel the app carries on as a plain program")
    func daemonGoesAway() async throws {
        var harness: ChannelHarness? = try ChannelHarness()
        let app = try #require(harness?.app)
        try await harness?.launch()
        let delegate = try #require(harness?.delegate)
        harness = nil  // closes the daemon's end
        #expect(await eventually { !app.isAttachedToDaemon })
        let task = app.beginBackgroundTask(name: "late")
        app.endBackgroundTask(task)
        #expect(app.backgroundTaskCount == 0)
        #expect(delegate.events == ["didFinishLaunching"])
    }

    @Test("run outside appd: didFinishLaunching, then didBecomeActive, no channel")
    func standalone() async throws {
        let app = Application()
        let delegate = RecordingDelegate()
        app.start(delegate: delegate, channel: nil)
        #expect(delegate.events == ["didFinishLaunching", "didBecomeActive"])
        #expect(delegate.options?.isAttachedToDaemon == false)
        #expect(delegate.options?.instance == nil)
        #expect(delegate.options?.launchedBy?.uid == Int(getuid()))
        #expect(app.state == .active)
        #expect(!app.isAttachedToDaemon)
    }
}

@Suite("APPD_LIFECYCLE_FD")
struct ChannelEnvironmentTests {
    @Test("unset means no channel; garbage and non-sockets are clear errors")
    func environment() throws {
        #expect(try LifecycleChannel.fromEnvironment([:]) == nil)
        #expect {
            try LifecycleChannel.fromEnvironment(["APPD_LIFECYCLE_FD": "three"])
        } throws: { ($0 as? AppRuntimeError)?.code == .invalidEnvironment }
        let scratch = Scratch()
        let file = try scratch.write("f", "x")
        let fd = open(file.path, O_RDONLY)
        defer { close(fd) }
        #expect {
            try LifecycleChannel.fromEnvironment(["APPD_LIFECYCLE_FD": "\(fd)"])
        } throws: { "\($0)".contains("not a SOCK_SEQPACKET socket") }
        #expect {
            try LifecycleChannel.fromEnvironment(["APPD_LIFECYCLE_FD": "999"])
        } throws: { ($0 as? AppRuntimeError)?.code == .io }
    }

    @Test("the channel becomes close-on-exec and the variable is removed for child processes")
    func adoption() throws {
        let (appEnd, daemonEnd) = try seqpacketPair()
        defer {
            close(appEnd)
            close(daemonEnd)
        }
        // As the app inherits it from its launcher: not close-on-exec.
        _ = fcntl(appEnd, F_SETFD, 0)
        #expect(fcntl(appEnd, F_GETFD) & FD_CLOEXEC == 0)
        setenv("APPD_LIFECYCLE_FD", "\(appEnd)", 1)
        let channel = try #require(
            try LifecycleChannel.fromEnvironment(["APPD_LIFECYCLE_FD": "\(appEnd)"]))
        #expect(channel.fd == appEnd)
        #expect(fcntl(appEnd, F_GETFD) & FD_CLOEXEC != 0)
        #expect(getenv("APPD_LIFECYCLE_FD") == nil)
    }
}
