import Foundation
import Testing

@testable import AppRuntime

/// A scratch directory removed when the value goes away, even if the test failed.
final class Scratch {
    let url: URL
    var path: String { url.path }

    init(_ label: String = "appruntime-test") {
        var template = Array("\(NSTemporaryDirectory())/\(label).XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        url =
            URL(
                fileURLWithPath: String(
                    decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
            )
            .standardizedFileURL
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    /// Writes `contents` at `relative`, creating folders.
    @discardableResult
    func write(_ relative: String, _ contents: Data) throws -> URL {
        let file = url.appendingPathComponent(relative)
        try FileManager.default.createDirectory(
            at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try contents.write(to: file)
        return file
    }

    @discardableResult
    func write(_ relative: String, _ text: String) throws -> URL {
        try write(relative, Data(text.utf8))
    }
}

/// A `socketpair(AF_UNIX, SOCK_SEQPACKET)` as appd makes it: `appEnd` for the app, `daemonEnd`
/// for the fake daemon.
func seqpacketPair() throws -> (appEnd: Int32, daemonEnd: Int32) {
    var fds: [Int32] = [-1, -1]
    let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
    guard socketpair(AF_UNIX, type, 0, &fds) == 0 else {
        throw AppRuntimeError.system("socketpair")
    }
    return (fds[0], fds[1])
}

/// appd's side of the channel, as far as a test needs it: raw datagrams in and out.
@MainActor
final class FakeDaemon {
    let fd: Int32

    init(fd: Int32) { self.fd = fd }

    deinit { close(fd) }

    func send(_ json: String) {
        let data = Data(json.utf8)
        let sent = data.withUnsafeBytes {
            Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
        }
        precondition(sent == data.count, "fake daemon: send failed")
    }

    func send(bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// The next datagram from the app as a JSON object; nil after `timeout` seconds or at EOF.
    /// Waits by yielding, never by blocking: the app's answers are sent from the main actor,
    /// which the test shares.
    func receive(timeout: Double = 5) async -> [String: Any]? {
        let deadline = Date().addingTimeInterval(timeout)
        while !hasPending {
            if Date() >= deadline { return nil }
            try? await Task.sleep(nanoseconds: 2_000_000)
        }
        var buffer = [UInt8](repeating: 0, count: 70_000)
        let n = buffer.withUnsafeMutableBytes {
            recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
        }
        guard n > 0 else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(buffer[..<n]))) as? [String: Any]
    }

    /// The next message's type (nil when none comes).
    func receiveType(timeout: Double = 5) async -> String? {
        await receive(timeout: timeout)?["type"] as? String
    }

    /// Whether a datagram from the app is waiting, right now.
    var hasPending: Bool {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&poller, 1, 0) == 1
    }

    /// Whether the app sent nothing within `timeout` seconds.
    func isQuiet(for timeout: Double = 0.2) async -> Bool {
        try? await Task.sleep(nanoseconds: UInt64(timeout * 1e9))
        return !hasPending
    }
}

/// A delegate that writes down every call, in order.
@MainActor
final class RecordingDelegate: AppDelegate {
    var events: [String] = []
    var options: LaunchOptions?
    /// Runs inside didFinishLaunching, before the runtime sends ready.
    var onLaunch: (@MainActor () -> Void)?

    func didFinishLaunching(options: LaunchOptions) {
        self.options = options
        events.append("didFinishLaunching")
        onLaunch?()
    }
    func willResignActive() { events.append("willResignActive") }
    func didBecomeActive() { events.append("didBecomeActive") }
    func didEnterBackground() { events.append("didEnterBackground") }
    func willEnterForeground() { events.append("willEnterForeground") }
    func willTerminate() { events.append("willTerminate") }
    func didReceiveMemoryWarning() { events.append("didReceiveMemoryWarning") }
}

/// An Application on one end of a socketpair, a fake daemon on the other; the process never
/// exits (exit codes and log lines are recorded instead).
@MainActor
final class ChannelHarness {
    let app = Application()
    let delegate = RecordingDelegate()
    let daemon: FakeDaemon
    var exitCodes: [Int32] = []
    var logLines: [String] = []

    init() throws {
        let (appEnd, daemonEnd) = try seqpacketPair()
        daemon = FakeDaemon(fd: daemonEnd)
        app.exitProcess = { [unowned self] in exitCodes.append($0) }
        app.log = { [unowned self] in logLines.append($0) }
        start = { [app, delegate] in
            app.start(delegate: delegate, channel: LifecycleChannel(fd: appEnd))
        }
    }

    private var start: () -> Void = {}

    /// Starts the app and reads its hello.
    func startApp() async {
        start()
        let hello = await daemon.receive()
        #expect(hello?["type"] as? String == "hello")
        #expect(hello?["version"] as? Int == 1)
    }

    /// Starts the app, answers its hello, and waits until it is ready.
    func launch(
        _ didFinishLaunching: String =
            #"{"type":"didFinishLaunching","instance":"i-1","arguments":["--x"],"launchedBy":{"uid":1000,"user":"ada"},"state":"inactive"}"#
    ) async throws {
        await startApp()
        daemon.send(didFinishLaunching)
        #expect(await daemon.receiveType() == "ready")
    }

    deinit {
        // Stops the reader thread; its `.closed` closes the app's end on the main queue.
        MainActor.assumeIsolated { app.channel?.shutdown() }
    }
}

/// Waits (yielding the main actor, so the channel's events get delivered) until `condition`
/// holds, at most `timeout` seconds.
@MainActor
func eventually(timeout: Double = 5, _ condition: @MainActor () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        try? await Task.sleep(nanoseconds: 5_000_000)
    }
    return condition()
}
