import AppdCLI
import Foundation

/// A one-line progress display on a terminal (stderr), for big bundles: redrawn in place at
/// most ten times a second, erased when done. Callers show it only when stderr is a terminal
/// and `--json` is off.
enum Progress {
    nonisolated(unsafe) private static var lastDraw: UInt64 = 0
    nonisolated(unsafe) private static var drawn = false
    nonisolated(unsafe) private static var started: UInt64 = 0

    /// `appd install --no-daemon`'s copy into staging.
    static let copying: @Sendable (Int, Int64, Int, Int64) -> Void = {
        files, bytes, totalFiles, totalBytes in
        let now = DispatchTime.now().uptimeNanoseconds
        if started == 0 { started = now }
        guard now - lastDraw > 100_000_000 || files == totalFiles else { return }
        lastDraw = now
        draw(
            line(
                "copying", files: files, of: totalFiles, bytes: bytes, of: totalBytes,
                since: started, now: now))
    }

    /// `copying 1,234/5,000 files, 50 MB of 196 MB (25%), 120 MB/s`.
    static func line(
        _ verb: String, files: Int, of totalFiles: Int?, bytes: Int64, of totalBytes: Int64?,
        since start: UInt64,
        now: UInt64
    ) -> String {
        var text =
            "\(verb) \(files)\(totalFiles.map { "/\($0)" } ?? "") files, \(Output.bytes(bytes))"
        if let totalBytes, totalBytes > 0 {
            text += " of \(Output.bytes(totalBytes)) (\(min(100, bytes * 100 / totalBytes))%)"
        }
        let seconds = Double(now - start) / 1e9
        if seconds > 0.05 {
            text += ", \(Output.bytes(Int64((Double(bytes) / seconds).rounded(.down))))/s"
        }
        return text
    }

    static func draw(_ line: String) {
        drawn = true
        FileHandle.standardError.write(Data("\r\u{1B}[K\(line)".utf8))
    }

    static func finish() {
        if drawn { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        drawn = false
    }
}

/// What has gone to the daemon: files and bytes of file data, against the totals when they are
/// known (a folder is counted first, an .ipa lists its own; a tar on stdin counts up).
final class UploadProgress {
    private let totals: (files: Int, bytes: Int64)?
    /// `sending` (to the daemon), `extracting` (--no-daemon with an archive).
    private let verb: String
    private var files = 0
    private var fileBytes: Int64 = 0
    private var sent: Int64 = 0
    private var lastDraw: UInt64 = 0
    private let start = DispatchTime.now().uptimeNanoseconds

    init(totals: (files: Int, bytes: Int64)?, verb: String = "sending") {
        self.totals = totals
        self.verb = verb
    }

    func file(_ size: Int64) {
        files += 1
        fileBytes += size
    }

    func sent(_ count: Int) {
        sent += Int64(count)
        let now = DispatchTime.now().uptimeNanoseconds
        guard now - lastDraw > 100_000_000 else { return }
        lastDraw = now
        draw(now: now)
    }

    private func draw(now: UInt64) {
        if totals == nil && files == 0 {
            // A tar stream: what it holds is known only to the daemon.
            Progress.draw(
                Progress.line(verb, files: 0, of: nil, bytes: sent, of: nil, since: start, now: now)
                    .replacingOccurrences(of: "\(verb) 0 files, ", with: "\(verb) "))
        } else {
            Progress.draw(
                Progress.line(
                    verb, files: files, of: totals?.files, bytes: fileBytes, of: totals?.bytes,
                    since: start, now: now))
        }
    }

    /// Everything is sent; the daemon now checks the signature against the hashes it took while
    /// writing, seals and flushes the bundle, and answers when that is done.
    func uploaded() {
        draw(now: DispatchTime.now().uptimeNanoseconds)
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        Progress.draw(
            "\(verb == "sending" ? "sent" : "extracted") \(totals == nil && files == 0 ? "" : "\(files) files, ")\(Output.bytes(totals == nil && files == 0 ? sent : fileBytes)) in \(String(format: "%.1f", seconds)) s; appd is verifying and sealing the bundle..."
        )
    }

    func finish() { Progress.finish() }
}
