import Foundation
import LifecycleProtocol
import Testing

@testable import AppRuntime

/// Daemon → app: what the Supervisor's channel writes (DaemonSide, the other file) is what
/// AppRuntime decodes.
@Suite("lifecycle vocabulary, daemon to app")
struct DaemonToAppTests {
    @Test(
        "every message type the daemon sends decodes as that message in AppRuntime",
        arguments: DaemonMessageType.allCases)
    func eachType(type: DaemonMessageType) throws {
        let fields: [LifecycleField: Any]
        let expected: DaemonMessage
        switch type {
        case .didFinishLaunching:
            fields = [
                .instance: "ab12cd34", .arguments: ["a b", "c"],
                .launchedBy: [
                    LifecycleField.uid.rawValue: 1000, LifecycleField.user.rawValue: "ada",
                ],
                .state: LifecycleAppState.background.rawValue,
            ]
            expected = .didFinishLaunching(
                instance: "ab12cd34", arguments: ["a b", "c"],
                launchedBy: .init(uid: 1000, user: "ada"),
                state: .background)
        case .didBecomeActive: (fields, expected) = ([:], .didBecomeActive)
        case .willResignActive: (fields, expected) = ([:], .willResignActive)
        case .didEnterBackground:
            (fields, expected) = ([.gracePeriod: 5.0], .didEnterBackground(gracePeriod: 5))
        case .willEnterForeground: (fields, expected) = ([:], .willEnterForeground)
        case .willTerminate:
            (fields, expected) = ([.gracePeriod: 2.5], .willTerminate(gracePeriod: 2.5))
        case .didReceiveMemoryWarning: (fields, expected) = ([:], .didReceiveMemoryWarning)
        case .defaultsDidChange: (fields, expected) = ([:], .defaultsDidChange)
        case .backgroundTaskBegan:
            fields = [.ref: 4, .task: 0, .timeRemaining: 0.0, .reason: "no time left"]
            expected = .backgroundTaskBegan(
                ref: 4, task: 0, timeRemaining: 0, reason: "no time left")
        case .backgroundTaskWillExpire:
            (fields, expected) = (
                [.task: 9, .timeRemaining: 1.0],
                .backgroundTaskWillExpire(task: 9, timeRemaining: 1)
            )
        case .performFetch:
            (fields, expected) = (
                [.fetch: 3, .timeRemaining: 30.0], .performFetch(fetch: 3, timeRemaining: 30)
            )
        }
        #expect(try DaemonMessage.decode(Data(DaemonSide.encoded(type, fields))) == expected)
    }

    @Test(
        "every state the vocabulary names is the app's state of that name",
        arguments: LifecycleAppState.allCases)
    func states(state: LifecycleAppState) throws {
        let message = try DaemonMessage.decode(
            Data(DaemonSide.encoded(.didFinishLaunching, [.state: state.rawValue])))
        guard case .didFinishLaunching(_, _, _, let decoded) = message else {
            Issue.record("\(message)")
            return
        }
        #expect(decoded.rawValue == state.rawValue)
    }
}

/// AppRuntime's side for the other direction's tests.
enum AppSide {
    /// The message of this type AppRuntime sends, as its bytes.
    static func encoded(_ type: AppMessageType) -> [UInt8] {
        let message: AppMessage
        switch type {
        case .hello: message = .hello
        case .ready: message = .ready
        case .beginBackgroundTask: message = .beginBackgroundTask(name: "sync notes", ref: 4)
        case .endBackgroundTask: message = .endBackgroundTask(task: 9)
        case .setMinimumBackgroundFetchInterval:
            message = .setMinimumBackgroundFetchInterval(seconds: 900)
        case .fetchCompleted: message = .fetchCompleted(fetch: 3, result: .newData)
        }
        return Array(message.encoded())
    }

    /// `setMinimumBackgroundFetchInterval(Application.backgroundFetchIntervalNever)`'s message.
    static func fetchNever() -> [UInt8] {
        #expect(!Application.backgroundFetchIntervalNever.isFinite)
        return Array(AppMessage.setMinimumBackgroundFetchInterval(seconds: nil).encoded())
    }
}
