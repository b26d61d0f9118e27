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
    /// truncated. Lines written between the copy and the truncation are lost; that window is a
    /// copy of at most `maxBytes`. So an instance keeps at most `maxBytes` in `.log.1` plus
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
        lseek(source, off_t(max(0, Int64(info.st_size) - maxBytes)), SEEK_SET)
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = read(source, &buffer, buffer.count)
            if count <= 0 { break }
            _ = buffer.withUnsafeBytes { write(target, $0.baseAddress, count) }
        }
        ftruncate(source, 0)
        return true
    }

    func remove(_ path: String) {
        unlink(path)
        unlink(path + ".1")
    }
}
