import Foundation
import LifecycleProtocol
import Testing

@testable import Supervisor

/// App → daemon: what AppRuntime encodes (AppSide, the other file: the two modules both name
/// an `AppMessage`) is what the Supervisor's parser reads.
@Suite("lifecycle vocabulary, app to daemon")
struct AppToDaemonTests {
    @Test(
        "every message type AppRuntime sends parses as that message in the daemon",
        arguments: AppMessageType.allCases)
    func eachType(type: AppMessageType) {
        let expected: AppMessage
        switch type {
        case .hello: expected = .hello(version: LifecycleWire.version)
        case .ready: expected = .ready
        case .beginBackgroundTask:
            expected = .beginBackgroundTask(name: "sync notes", ref: 4, seconds: nil)
        case .endBackgroundTask: expected = .endBackgroundTask(task: 9)
        case .setMinimumBackgroundFetchInterval: expected = .setFetchInterval(seconds: 900)
        case .fetchCompleted: expected = .fetchCompleted(fetch: 3, result: .newData)
        }
        let parsed = AppMessage.parse(AppSide.encoded(type))
        #expect(parsed == expected)
        #expect(parsed.name == type.rawValue)
    }

    @Test("backgroundFetchIntervalNever reaches the daemon as \"never\": fetches off")
    func fetchNever() {
        #expect(AppMessage.parse(AppSide.fetchNever()) == .setFetchInterval(seconds: nil))
    }

    @Test(
        "a fetch answer with a result or number outside the vocabulary is a protocol error",
        arguments: [
            #"{"type":"fetchCompleted","fetch":1,"result":"maybe"}"#,
            #"{"type":"fetchCompleted","fetch":0,"result":"noData"}"#,
            #"{"type":"fetchCompleted","result":"noData"}"#,
            #"{"type":"setMinimumBackgroundFetchInterval","interval":-5}"#,
            #"{"type":"setMinimumBackgroundFetchInterval","interval":"sometimes"}"#,
            #"{"type":"setMinimumBackgroundFetchInterval"}"#,
        ])
    func fetchErrors(text: String) {
        guard case .protocolError = AppMessage.parse(Array(text.utf8)) else {
            Issue.record("\(text) parsed as \(AppMessage.parse(Array(text.utf8)))")
            return
        }
    }

    @Test("a type the vocabulary does not name is unknown to the daemon, not an error")
    func unknownType() {
        #expect(
            AppMessage.parse(Array(#"{"type":"futureThing"}"#.utf8))
                == .unknown(type: "futureThing"))
    }
}

/// The daemon's side for the other direction's tests.
enum DaemonSide {
    /// A message as the Supervisor's channel writes it.
    static func encoded(_ type: DaemonMessageType, _ fields: [LifecycleField: Any]) -> [UInt8] {
        var message: [String: Any] = [LifecycleField.type.rawValue: type.rawValue]
        for (key, value) in fields { message[key.rawValue] = value }
        return Array(LifecycleChannel.encode(message) ?? Data())
    }
}
