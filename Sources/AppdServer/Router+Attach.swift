import AppdAPI
import AppdBase
import Foundation
import Glibc
import Supervisor

extension Router {
    /// `POST /v1/apps/{id}/launch?attach=1`: the launch, then in the same answer the instance,
    /// its output as it is written and, once it has exited, the ended instance, as frames
    /// (`AttachFrame`, docs/api.md). What `appctl launch --console` does in one exchange instead
    /// of three (launch, `logs?follow=1`, `wait`). A launch that fails is answered as without
    /// `attach` (its error, nothing streamed). A client that goes away ends the stream; the
    /// instance keeps running, as after a followed log's client goes.
    func launchAttached(_ id: String, _ request: Request) async throws -> Reply {
        let body = try await request.decode(LaunchRequest.self, limit: maxRequestBytes)
        try Self.checkLaunch(body)
        let (instance, timings) = try await supervisor.launchTimed(
            AppID(id), arguments: body.arguments, caller: request.caller.uid,
            background: body.background)
        let supervisor = supervisor
        let first = try APICoding.encoder().encode(instance)
        return .stream(
            contentType: AttachFrame.contentType,
            headers: [("Server-Timing", timings.serverTiming)]
        ) { writer in
            try await writer.write(AttachFrame.frame(AttachFrame.instance, first))
            // Output: the log from its start (nothing was written before the launch answered,
            // and the log's first bytes may be there already), as `logs?follow=1` sends it.
            let reader = try await LogReader(instance.id, of: supervisor, settle: false)
            try await reader.followFromStart(
                pieceSize: AttachFrame.maxOutputPayload, into: OutputFrames(writer: writer))
            // Exited (the follow ends only then): the wait answers at once.
            let ended = try await supervisor.waitForExit(instance.id)
            guard ended.state == .exited else {
                let failure = AppdError(
                    .unavailable, "appd is stopping; instance \(ended.id) is still \(ended.state)",
                    hint: "it keeps running; see it with 'appctl ps' once appd is back")
                try await writer.write(
                    AttachFrame.frame(
                        AttachFrame.error,
                        try APICoding.encoder().encode(APIErrorBody(failure))))
                return
            }
            try await writer.write(
                AttachFrame.frame(AttachFrame.exit, try APICoding.encoder().encode(ended)))
        }
    }

    /// What both launch forms refuse before launching.
    static func checkLaunch(_ body: LaunchRequest) throws {
        guard body.arguments.count <= 4096, body.arguments.allSatisfy({ !$0.contains("\0") }) else {
            throw AppdError(.badRequest, "arguments: at most 4096, none containing NUL")
        }
    }
}

/// Each write becomes one output frame (the log is read in pieces of at most
/// `AttachFrame.maxOutputPayload` bytes).
struct OutputFrames: ByteSink, LogSink {
    let writer: StreamWriter

    func write(_ bytes: some Collection<UInt8>) async throws {
        guard !bytes.isEmpty else { return }
        try await writer.write(AttachFrame.frame(AttachFrame.output, bytes))
    }
}
