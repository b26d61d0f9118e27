import AppBundle
import AppContainers
import AppdBase
import AppdConfig
import BundleArchive
import Dispatch
import Foundation
import Glibc
import Logging
import NIOCore

/// Installs from a tar stream (docs/api.md, "Installing through the daemon"): extracted into
/// an `IncomingBundle` (`<root>/incoming/<uuid>/<Name.app>`, root-only) as it arrives, each
/// file hashed as it is written, then installed from there, as `appd install --no-daemon`
/// installs an archive. File I/O runs on a queue of its own, never on
/// the event loop or the cooperative pool.
final class Installer: Sendable {
    let store: AppStore
    let configuration: LiveConfiguration
    let incoming: String
    let logger: Logger
    private let queue = DispatchQueue(label: "appd.installer")

    init(store: AppStore, configuration: LiveConfiguration, logger: Logger) throws {
        self.store = store
        self.configuration = configuration
        self.logger = logger
        if configuration.current.signing.allowUnsigned {
            logger.warning(
                "[Signing] AllowUnsigned=yes: unsigned bundles can be installed; never use that setting outside development"
            )
        }
        incoming = "\(store.root.path)/incoming"
        // What an earlier daemon left half-received is garbage now.
        try? FileManager.default.removeItem(atPath: incoming)
        guard mkdir(incoming, 0o700) == 0 else { throw AppdError.system("mkdir \(incoming)") }
    }

    func onQueue<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try body() }) }
        }
    }

    func install(_ request: Request) async throws -> InstallResult {
        let name = try Self.bundleName(request.query["name"])
        let type = request.headers.first(name: "Content-Type")?.lowercased() ?? ""
        guard type.hasPrefix("application/x-tar") else {
            throw AppdError(
                .unsupportedMediaType,
                "an install takes Content-Type application/x-tar, not '\(type.prefix(100))'",
                hint: "docs/bundle-archive.md: tar -C Name.app -cf - . | curl ... --data-binary @-")
        }
        // Errors about the bundle have it as their subject, sent without this folder: the
        // client shows it by its own path for it (appd install).
        let received = try IncomingBundle(store: store, name: name)

        var installOptions = InstallOptions()
        installOptions.allowDowngrade = request.flag("allowDowngrade")
        installOptions.allowSignerChange = request.flag("allowSignerChange")
        let options = installOptions
        var result: InstallResult
        var laps = Laps()
        do {
            let extractor = try await onQueue { [configuration] in
                try ExtractorBox(into: received.path, limits: configuration.current.bundleLimits)
            }
            try await receive(request.body, into: extractor)
            let receive = laps.lap()
            // The extracted tree is renamed into staging, not copied: its bytes, hashed as
            // they were written, are written once.
            result = try await onQueue {
                try received.install(digests: extractor.digests, options: options)
            }
            result.timings.receive = receive
        } catch {
            try? await onQueue { received.discard() }
            throw error
        }
        if let warning = result.signing.warning {
            logger.warning("\(warning)", metadata: ["app": "\(result.app.bundleID)"])
        }
        logQuarantined(result.recovery)
        return result
    }

    /// How much of the body the install queue is handed at a time. NIO reads 64 KiB at most
    /// (often less): one queue hop per read cost more than extracting the bytes.
    static let batchBytes = 1 << 20

    /// Feeds the body to `extractor` on the install queue, `batchBytes` at a time, the next
    /// batch gathered while the last one is extracted: at most two batches held, whatever the
    /// size of the archive. Returns once the extractor has finished (the end-of-archive marker
    /// checked); the first error stops it, after the batch in flight is done.
    private func receive(_ body: RequestBody, into extractor: ExtractorBox) async throws {
        var inFlight: Task<Void, any Error>?
        var batch: [ByteBuffer] = []
        var bytes = 0
        do {
            while let chunk = try await body.next() {
                batch.append(chunk)
                bytes += chunk.readableBytes
                guard bytes >= Self.batchBytes else { continue }
                try await inFlight?.value
                let full = batch
                inFlight = Task { try await self.onQueue { try extractor.consume(full) } }
                batch = []
                bytes = 0
            }
            try await inFlight?.value
        } catch {
            _ = try? await inFlight?.value
            throw error
        }
        let last = batch
        try await onQueue {
            try extractor.consume(last)
            try extractor.finish()
        }
    }

    /// Recovery's leftovers it could not remove: moved aside (appd doctor lists them), logged.
    func logQuarantined(_ report: RecoveryReport) {
        for entry in report.quarantined {
            logger.error(
                "could not remove \(entry.origin); quarantined as \(entry.path): \(entry.reason)",
                metadata: ["hint": "fix the cause, then run 'appd doctor --repair'"])
        }
    }

    /// `Hello.app`: one path component ending in .app.
    static func bundleName(_ value: String?) throws -> String {
        guard let value, !value.isEmpty else {
            throw AppdError(
                .badRequest,
                "an install needs the bundle folder's name: POST /v1/apps?name=Hello.app")
        }
        guard value.hasSuffix(".app"), value.count > 4, value.utf8.count <= 255,
            !value.contains("/"),
            !value.contains("\0"), !value.hasPrefix(".")
        else {
            throw AppdError(
                .badRequest,
                "name '\(value.prefix(100))' is not a bundle folder name like Hello.app")
        }
        return value
    }
}

/// The extractor (a noncopyable value) behind a reference the install queue can reach; used by
/// one request at a time, in order.
final class ExtractorBox: @unchecked Sendable {
    private var extractor: BundleArchiveExtractor

    init(into directory: String, limits: BundleLimits, rules: ExtractionRules = .bundle) throws {
        extractor = try BundleArchiveExtractor(into: directory, limits: limits, rules: rules)
    }

    func consume(_ buffer: ByteBuffer) throws {
        try buffer.withUnsafeReadableBytes { try extractor.consume($0) }
    }

    func consume(_ buffers: [ByteBuffer]) throws {
        for buffer in buffers {
            try buffer.withUnsafeReadableBytes { try extractor.consume($0) }
        }
    }

    func finish() throws { try extractor.finish() }

    var digests: [String: [UInt8]] { extractor.fileDigests }

    var progress: (files: Int, bytes: Int64) { extractor.progress }
}
