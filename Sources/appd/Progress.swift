import AppdCLI
import Foundation

/// A one-line progress display on a terminal, for big bundles.
enum Progress {
    nonisolated(unsafe) private static var lastDraw: UInt64 = 0
    nonisolated(unsafe) private static var drawn = false

    static let copying: @Sendable (Int, Int64, Int, Int64) -> Void = {
        files, bytes, totalFiles, totalBytes in
        let now = DispatchTime.now().uptimeNanoseconds
        guard now - lastDraw > 100_000_000 || files == totalFiles else { return }
        lastDraw = now
        draw(
            "copying \(files)/\(totalFiles) files, \(Output.bytes(bytes)) of \(Output.bytes(totalBytes))"
        )
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

/// How much of the archive has gone to the daemon, redrawn at most ten times a second. The
/// total is unknown (the archive is written as the bundle is walked), so it counts up.
final class UploadProgress {
    private var sent: Int64 = 0
    private var lastDraw: UInt64 = 0

    func sent(_ count: Int) {
        sent += Int64(count)
        let now = DispatchTime.now().uptimeNanoseconds
        guard now - lastDraw > 100_000_000 else { return }
        lastDraw = now
        Progress.draw("sending \(Output.bytes(sent)) to appd")
    }

    /// The daemon now checks and copies what it received; its answer comes when that is done.
    func uploaded() {
        Progress.draw("sent \(Output.bytes(sent)); appd is installing...")
    }

    func finish() { Progress.finish() }
}
