import AppBundle
import Foundation
import CLinux
import Glibc

/// Each instance's stdout and stderr: `<state root>/logs/<app>/<instance>.log` and `.log.1`,
/// written and rotated (by rename) by the instance's output relay in `appd-exec`
/// (docs/app-output.md), never by the app, which holds only a pipe. The daemon makes the pipe
/// and opens the folder for the relay, reads the files for `appctl logs`, and keeps the logs of
/// the last `KeepExited` instances. Beside each file the relay keeps its time index
/// (`.log.idx`, `.log.1.idx`; LogTimeIndex), which counts against the same bound.
public struct InstanceLogs: Sendable {
    let directory: String
    let maxBytes: Int64

    init(stateRoot: String, maxBytes: Int64) throws {
        directory = "\(stateRoot)/logs"
        self.maxBytes = maxBytes
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw AppdError.system("mkdir \(directory)")
        }
    }

    func path(app: String, instance: String) -> String { "\(directory)/\(app)/\(instance).log" }

    /// The app's log folder, opened for the relay (O_DIRECTORY|O_NOFOLLOW: a symlink planted as
    /// the folder is refused, not followed).
    func openFolder(app: String) throws -> Int32 {
        let folder = "\(directory)/\(app)"
        if mkdir(folder, 0o700) != 0 && errno != EEXIST {
            throw AppdError.system("mkdir \(folder)")
        }
        let fd = Glibc.open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw AppdError.system("open \(folder)") }
        return fd
    }

    /// A pipe for the app's stdout and stderr, both ends close-on-exec (the spawn places them).
    func pipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard appd_pipe_cloexec(&fds) == 0 else {
            throw AppdError.system("pipe for the app's output")
        }
        return (fds[0], fds[1])
    }

    /// Waits until what the app wrote before now is in its log: the pipe is empty (FIONREAD on
    /// the relay's read end, opened through /proc) and the relay has written what it read (it
    /// holds the pipe's flock from each read until the bytes are in the log: a shared lock
    /// taken here waits for that). Bounded by `timeout`: an app that writes faster than the
    /// relay keeps the pipe full, and a frozen relay never empties it; then the log is read as
    /// it is. The relay is the outer launcher's child that holds a pipe open for reading (the
    /// sandbox's PID 1, its other child, holds the write end); an instance whose launcher is
    /// gone has nothing left to wait for.
    public static func settle(launcher: pid_t, timeout: Duration = .seconds(1)) async {
        guard launcher > 0, let pipe = relayPipe(launcher: launcher) else { return }
        defer { close(pipe) }
        let deadline = ContinuousClock.now + timeout
        while true {
            var queued: Int32 = 0
            guard ioctl(pipe, UInt(FIONREAD), &queued) == 0 else { return }
            if queued == 0, flock(pipe, LOCK_SH | LOCK_NB) == 0 {
                _ = flock(pipe, LOCK_UN)
                return
            }
            guard ContinuousClock.now < deadline else { return }
            try? await Task.sleep(for: .milliseconds(1))
        }
    }

    /// A new read-only description of the relay's end of the output pipe, or nil.
    static func relayPipe(launcher: pid_t) -> Int32? {
        guard let children = try? String(contentsOfFile: "/proc/\(launcher)/task/\(launcher)/children", encoding: .utf8)
        else { return nil }
        for child in children.split(separator: " ").compactMap({ pid_t($0) }).prefix(8) {
            let fds = "/proc/\(child)/fd"
            guard let directory = opendir(fds) else { continue }
            defer { closedir(directory) }
            var seen = 0
            while let entry = readdir(directory), seen < 64 {
                seen += 1
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                guard let number = Int32(name) else { continue }
                var target = [CChar](repeating: 0, count: 64)
                let length = readlink("\(fds)/\(number)", &target, target.count - 1)
                guard length > 0, String(decoding: target[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self).hasPrefix("pipe:"),
                    let info = try? String(contentsOfFile: "/proc/\(child)/fdinfo/\(number)", encoding: .utf8),
                    let flags = info.split(separator: "\n").first(where: { $0.hasPrefix("flags:") })?
                        .split(separator: "\t").last.flatMap({ Int32($0.trimmingCharacters(in: .whitespaces), radix: 8) }),
                    flags & O_ACCMODE == O_RDONLY
                else { continue }
                let fd = open("\(fds)/\(number)", O_RDONLY | O_NONBLOCK | O_CLOEXEC)
                if fd >= 0 { return fd }
            }
        }
        return nil
    }

    /// The log, its rotated part and their time indexes.
    func remove(_ path: String) {
        for name in [path, path + ".1", path + ".idx", path + ".1.idx"] { unlink(name) }
    }
}
