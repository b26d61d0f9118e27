import AppBundle
import Foundation
import Glibc

/// Each instance's stdout and stderr: `<state root>/logs/<app>/<instance>.log`, which the app
/// writes directly (O_APPEND), so output goes on while the daemon restarts. The daemon rotates
/// it (copy to `.log.1`, truncate: the app's O_APPEND writes continue at the new end) past
/// `LogMaxBytes`, and keeps the logs of the last `KeepExited` instances.
struct InstanceLogs: Sendable {
    let directory: String
    let maxBytes: Int64

    init(stateRoot: String, maxBytes: Int64) throws {
        directory = "\(stateRoot)/logs"
        self.maxBytes = maxBytes
        if mkdir(directory, 0o700) != 0 && errno != EEXIST { throw AppdError.system("mkdir \(directory)") }
    }

    func path(app: String, instance: String) -> String { "\(directory)/\(app)/\(instance).log" }

    func open(app: String, instance: String) throws -> Int32 {
        let folder = "\(directory)/\(app)"
        if mkdir(folder, 0o700) != 0 && errno != EEXIST { throw AppdError.system("mkdir \(folder)") }
        let path = path(app: app, instance: instance)
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw AppdError.system("open \(path)") }
        return fd
    }

    /// Rotates the log when it is over the limit: its last `maxBytes` become `.log.1`, and it is
    /// truncated. Lines written after the size was read and before the truncation are lost; that
    /// window is a copy of at most `maxBytes`. So an instance keeps at most `maxBytes` in `.log.1` plus
    /// what it wrote since the last check (four times a second) in `.log`.
    @discardableResult
    func rotateIfNeeded(_ path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0, Int64(info.st_size) > maxBytes else { return false }
        let rotated = path + ".1"
        unlink(rotated)
        let source = Glibc.open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard source >= 0 else { return false }
        defer { close(source) }
        let target = Glibc.open(rotated, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard target >= 0 else { return false }
        defer { close(target) }
        // The last maxBytes of what the file held when we looked: an app still writing must not
        // make the copy grow past the limit (with the 250 ms passes it did, under a burst).
        var position = max(0, Int64(info.st_size) - maxBytes)
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while position < Int64(info.st_size) {
            let wanted = Int(min(Int64(buffer.count), Int64(info.st_size) - position))
            let count = buffer.withUnsafeMutableBytes { pread(source, $0.baseAddress, wanted, off_t(position)) }
            if count <= 0 { break }
            _ = buffer.withUnsafeBytes { write(target, $0.baseAddress, count) }
            position += Int64(count)
        }
        ftruncate(source, 0)
        return true
    }

    func remove(_ path: String) {
        unlink(path)
        unlink(path + ".1")
    }
}
