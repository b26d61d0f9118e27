import AppdAPI
import AppdBase

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// How an attached launch ended on the client's side.
public enum AttachedLaunch: Sendable {
    /// The instance ran and exited: the ended instance, as `GET .../wait` answers it.
    case ended(APIInstance)
    /// The daemon launched it but does not know `attach=1` (an older appd): it answered the
    /// plain launch. Its output and exit are the caller's to fetch (`logs?follow=1`, `wait`).
    case notAttached(APIInstance)
}

extension AppdClient {
    /// `POST /v1/apps/{id}/launch?attach=1` (docs/api.md): launches `app` and follows it in the
    /// same exchange. `onInstance` gets the new instance as soon as the daemon sends it,
    /// `onOutput` each piece of the app's output as it arrives; returns the ended instance.
    /// The app's output is payload inside length-framed frames: nothing it writes can pass
    /// for the instance or the exit. A failed launch throws its `AppdError` as `post` does.
    public func launchAttached(
        _ app: String, _ request: LaunchRequest,
        onInstance: (APIInstance) throws -> Void,
        onOutput: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> AttachedLaunch {
        let data = try Self.encoded(request, what: "the launch request")
        let http = HTTPRequest(
            method: "POST", target: Self.path("apps", app, "launch", query: ["attach": "1"]),
            accept: AttachFrame.contentType, body: .data(data, contentType: Self.jsonType))
        var instance: APIInstance?
        do {
            return try perform(http) { head, reader in
                try checkStatus(head, reader, http)
                let framing = try HTTPResponseReader.framing(of: head, method: http.method)
                let type = head.value("Content-Type")?.lowercased() ?? ""
                guard type.hasPrefix(AttachFrame.contentType) else {
                    // An appd without attach=1 answered the plain launch (201, the instance).
                    let launched = try decodeFrame(
                        APIInstance.self, try collect(head, reader, http, limit: maxResponseBytes),
                        what: "the launched instance", for: http)
                    try onInstance(launched)
                    return .notAttached(launched)
                }
                var parser = AttachFrameParser()
                var ended: APIInstance?
                var failure: AppdError?
                try reader.body(framing) { bytes in
                    // Nothing may follow the exit (or an error): a frame after it is garbage.
                    guard ended == nil, failure == nil else {
                        throw AttachFrameError("bytes after the last frame")
                    }
                    try parser.feed(bytes) { event in
                        guard ended == nil, failure == nil else {
                            throw AttachFrameError("a frame after the last one")
                        }
                        switch event {
                        case .output(let piece):
                            guard instance != nil else {
                                throw AttachFrameError("output before the instance")
                            }
                            try onOutput(piece)
                        case .frame(AttachFrame.instance, let payload):
                            guard instance == nil else {
                                throw AttachFrameError("a second instance frame")
                            }
                            let launched = try decodeFrame(
                                APIInstance.self, Data(payload), what: "the launched instance",
                                for: http)
                            instance = launched
                            try onInstance(launched)
                        case .frame(AttachFrame.exit, let payload):
                            guard let launched = instance else {
                                throw AttachFrameError("the exit before the instance")
                            }
                            let exited = try decodeFrame(
                                APIInstance.self, Data(payload), what: "the ended instance",
                                for: http)
                            guard exited.id == launched.id else {
                                throw AttachFrameError(
                                    "the exit is of instance \(exited.id), not \(launched.id)")
                            }
                            ended = exited
                        case .frame(AttachFrame.error, let payload):
                            failure =
                                (try? APICoding.decoder().decode(
                                    APIErrorBody.self, from: Data(payload)))?
                                .error
                                ?? AppdError(
                                    .badResponse, "appd sent an error frame it could not word")
                        case .frame:
                            break  // A kind of a later version: skipped.
                        }
                    }
                }
                if let failure { throw failure }
                guard let ended, parser.atFrameBoundary else {
                    throw ResponseFailure.truncated(
                        ended == nil
                            ? "it ended before the instance exited" : "it ended inside a frame")
                }
                return .ended(ended)
            }
        } catch let error as AttachFrameError {
            throw afterLaunch(
                AppdError(
                    .badResponse,
                    "appd's answer to \(http.summary) is not a valid attached launch: \(error)",
                    hint:
                        "appd and this client may be different versions: compare 'appctl version' with the installed appd"
                ), instance: instance)
        } catch let error as ResponseFailure {
            throw afterLaunch(describe(error, http), instance: instance)
        } catch let error as AppdError {
            throw afterLaunch(error, instance: instance)
        }
    }

    /// A failure once the instance is known: it was launched and may still run.
    private func afterLaunch(_ error: AppdError, instance: APIInstance?) -> AppdError {
        guard let instance else { return error }
        var error = error
        let launched = "\(instance.app) was launched as \(instance.id) and may still run: appctl ps"
        error.hint = error.hint.map { "\($0); \(launched)" } ?? launched
        return error
    }

    private func decodeFrame<T: Decodable>(
        _ type: T.Type, _ data: Data, what: String, for request: HTTPRequest
    ) throws -> T {
        do {
            return try APICoding.decoder().decode(T.self, from: data)
        } catch {
            throw AppdError(
                .badResponse,
                "cannot read \(what) in appd's answer to \(request.summary): \(Self.describe(decoding: error))",
                hint:
                    "appd and this client may be different versions: compare 'appctl version' with the installed appd"
            )
        }
    }
}
