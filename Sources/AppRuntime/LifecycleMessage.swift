import Foundation
import LifecycleProtocol

// The wire format of docs/lifecycle.md: one UTF-8 JSON object per datagram, at most 64 KiB,
// with a `"type"`; unknown types and unknown fields are ignored (forward compatibility). The
// message types, field names and states are LifecycleProtocol's, which the daemon uses too.

/// A message the app sends to appd.
enum AppMessage: Equatable, Sendable {
    case hello
    case ready
    case beginBackgroundTask(name: String?, ref: Int)
    case endBackgroundTask(task: Int)
    /// nil: "never".
    case setMinimumBackgroundFetchInterval(seconds: Double?)
    case fetchCompleted(fetch: Int, result: BackgroundFetchResult)

    /// setMinimumBackgroundFetchInterval's `interval`: seconds, or "never".
    private enum Interval: Encodable {
        case seconds(Double)
        case never

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .seconds(let value): try container.encode(value)
            case .never: try container.encode(LifecycleWire.fetchIntervalNever)
            }
        }
    }

    private struct Wire: Encodable {
        var type: AppMessageType
        var version: Int?
        var name: String?
        var ref: Int?
        var task: Int?
        var interval: Interval?
        var fetch: Int?
        var result: String?

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: LifecycleField.self)
            try container.encode(type.rawValue, forKey: .type)
            try container.encodeIfPresent(version, forKey: .version)
            try container.encodeIfPresent(name, forKey: .name)
            try container.encodeIfPresent(ref, forKey: .ref)
            try container.encodeIfPresent(task, forKey: .task)
            try container.encodeIfPresent(interval, forKey: .interval)
            try container.encodeIfPresent(fetch, forKey: .fetch)
            try container.encodeIfPresent(result, forKey: .result)
        }
    }

    func encoded() -> Data {
        let wire: Wire
        switch self {
        case .hello: wire = Wire(type: .hello, version: LifecycleWire.version)
        case .ready: wire = Wire(type: .ready)
        case .beginBackgroundTask(let name, let ref):
            wire = Wire(type: .beginBackgroundTask, name: name, ref: ref)
        case .endBackgroundTask(let task): wire = Wire(type: .endBackgroundTask, task: task)
        case .setMinimumBackgroundFetchInterval(let seconds):
            wire = Wire(
                type: .setMinimumBackgroundFetchInterval,
                interval: seconds.map { Interval.seconds($0) } ?? Interval.never)
        case .fetchCompleted(let fetch, let result):
            wire = Wire(type: .fetchCompleted, fetch: fetch, result: result.rawValue)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding a struct of strings and integers cannot fail.
        return (try? encoder.encode(wire)) ?? Data(#"{"type":"ready"}"#.utf8)
    }
}

/// A message appd sends to the app, decoded on the channel's reader thread (hence Sendable).
enum DaemonMessage: Equatable, Sendable {
    case didFinishLaunching(
        instance: String?, arguments: [String], launchedBy: LaunchOptions.Launcher?,
        state: ApplicationState)
    case didBecomeActive
    case willResignActive
    case didEnterBackground(gracePeriod: Double?)
    case willEnterForeground
    case willTerminate(gracePeriod: Double?)
    case didReceiveMemoryWarning
    case backgroundTaskBegan(ref: Int, task: Int, timeRemaining: Double?, reason: String?)
    case backgroundTaskWillExpire(task: Int, timeRemaining: Double?)
    case defaultsDidChange
    case performFetch(fetch: Int, timeRemaining: Double?)
    /// A type this runtime does not know: ignored, as the contract says.
    case unknown(type: String)

    private struct Wire: Decodable {
        struct LaunchedBy: Decodable {
            var uid: Int
            var user: String?

            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: LifecycleField.self)
                uid = try container.decode(Int.self, forKey: .uid)
                user = try container.decodeIfPresent(String.self, forKey: .user)
            }
        }
        var type: String
        var instance: String?
        var arguments: [String]?
        var launchedBy: LaunchedBy?
        var state: String?
        var gracePeriod: Double?
        var ref: Int?
        var task: Int?
        var timeRemaining: Double?
        var reason: String?
        var fetch: Int?

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: LifecycleField.self)
            type = try container.decode(String.self, forKey: .type)
            instance = try container.decodeIfPresent(String.self, forKey: .instance)
            arguments = try container.decodeIfPresent([String].self, forKey: .arguments)
            launchedBy = try container.decodeIfPresent(LaunchedBy.self, forKey: .launchedBy)
            state = try container.decodeIfPresent(String.self, forKey: .state)
            gracePeriod = try container.decodeIfPresent(Double.self, forKey: .gracePeriod)
            ref = try container.decodeIfPresent(Int.self, forKey: .ref)
            task = try container.decodeIfPresent(Int.self, forKey: .task)
            timeRemaining = try container.decodeIfPresent(Double.self, forKey: .timeRemaining)
            reason = try container.decodeIfPresent(String.self, forKey: .reason)
            fetch = try container.decodeIfPresent(Int.self, forKey: .fetch)
        }
    }

    /// Decodes one datagram; the error says what is wrong, for the log line.
    static func decode(_ data: Data) throws -> DaemonMessage {
        guard data.count <= LifecycleWire.maxMessageBytes else {
            throw AppRuntimeError(
                .invalidData,
                "message of \(data.count) bytes is over the limit of \(LifecycleWire.maxMessageBytes)"
            )
        }
        guard (try? JSONSerialization.jsonObject(with: data)) is [String: Any] else {
            throw AppRuntimeError(.invalidData, "message is not a JSON object")
        }
        let wire: Wire
        do {
            wire = try JSONDecoder().decode(Wire.self, from: data)
        } catch {
            throw AppRuntimeError(
                .invalidData, "message has no type or a field of the wrong type: \(error)")
        }
        func require<T>(_ value: T?, _ field: LifecycleField) throws -> T {
            guard let value else {
                throw AppRuntimeError(.invalidData, "\(wire.type) without '\(field.rawValue)'")
            }
            return value
        }
        guard let type = DaemonMessageType(rawValue: wire.type) else {
            return .unknown(type: wire.type)
        }
        switch type {
        case .didFinishLaunching:
            return .didFinishLaunching(
                instance: wire.instance, arguments: wire.arguments ?? [],
                launchedBy: wire.launchedBy.map { .init(uid: $0.uid, user: $0.user) },
                state: wire.state.flatMap(LifecycleAppState.init(rawValue:)).map(
                    ApplicationState.init) ?? .inactive)
        case .didBecomeActive: return .didBecomeActive
        case .willResignActive: return .willResignActive
        case .didEnterBackground: return .didEnterBackground(gracePeriod: wire.gracePeriod)
        case .willEnterForeground: return .willEnterForeground
        case .willTerminate: return .willTerminate(gracePeriod: wire.gracePeriod)
        case .didReceiveMemoryWarning: return .didReceiveMemoryWarning
        case .backgroundTaskBegan:
            return .backgroundTaskBegan(
                ref: try require(wire.ref, .ref), task: try require(wire.task, .task),
                timeRemaining: wire.timeRemaining, reason: wire.reason)
        case .backgroundTaskWillExpire:
            return .backgroundTaskWillExpire(
                task: try require(wire.task, .task), timeRemaining: wire.timeRemaining)
        case .defaultsDidChange: return .defaultsDidChange
        case .performFetch:
            return .performFetch(
                fetch: try require(wire.fetch, .fetch), timeRemaining: wire.timeRemaining)
        }
    }
}

extension ApplicationState {
    /// The state as the channel names it (LifecycleProtocol's `LifecycleAppState`).
    init(_ state: LifecycleAppState) {
        switch state {
        case .inactive: self = .inactive
        case .active: self = .active
        case .background: self = .background
        }
    }
}
