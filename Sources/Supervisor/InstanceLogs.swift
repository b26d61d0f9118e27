import AppdBase
import CLinux
import Foundation
import Glibc
import LauncherProtocol
import Sandbox

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
        try LogDestination.openFolder(logs: directory, app: app)
    }

    /// Waits until what the app wrote before now is in its log: the pipe is empty (FIONREAD on
    /// the relay's read end, opened through /proc) and the relay has written what it read (it
    /// holds an flock on a memfd of its own, `APPD_OUTPUT_LOCK_NAME`, from each read until the
    /// bytes are in the log: a shared lock tried here fails until then). The app never holds
    /// that memfd, so whatever it locks cannot hold this up. Bounded by `timeout`: an app that
    /// writes faster than the relay keeps the pipe full, and a stopped relay never empties it;
    /// then the log is read as it is. The relay is the outer launcher's child that holds a pipe
    /// open for reading (the sandbox's PID 1, its other child, holds the write end); an instance
    /// whose launcher is gone has nothing left to wait for. A relay from before the memfd
    /// (adopted from an older daemon) locked the pipe itself: that lock is tried instead.
    public static func settle(launcher: pid_t, timeout: Duration = .seconds(1)) async {
        guard launcher > 0, let relay = relayDescriptors(launcher: launcher) else { return }
        defer {
            close(relay.pipe)
            if relay.lock != relay.pipe { close(relay.lock) }
        }
        let deadline = ContinuousClock.now + timeout
        while true {
            var queued: Int32 = 0
            guard ioctl(relay.pipe, UInt(FIONREAD), &queued) == 0 else { return }
            if queued == 0, flock(relay.lock, LOCK_SH | LOCK_NB) == 0 {
                _ = flock(relay.lock, LOCK_UN)
                return
            }
            guard ContinuousClock.now < deadline else { return }
            try? await Task.sleep(for: .milliseconds(1))
        }
    }

    /// New descriptions of the relay's end of the output pipe (read-only) and of its lock
    /// memfd (the pipe again for a relay without one), or nil.
    static func relayDescriptors(launcher: pid_t) -> (pipe: Int32, lock: Int32)? {
        guard
            let children = try? String(
                contentsOfFile: "/proc/\(launcher)/task/\(launcher)/children", encoding: .utf8)
        else { return nil }
        let lockTarget = "/memfd:" + APPD_OUTPUT_LOCK_NAME
        for child in children.split(separator: " ").compactMap({ pid_t($0) }).prefix(8) {
            let fds = "/proc/\(child)/fd"
            guard let directory = opendir(fds) else { continue }
            defer { closedir(directory) }
            var pipe: Int32?
            var lock: Int32?
            var seen = 0
            while let entry = readdir(directory), seen < 64 {
                seen += 1
                let name = withUnsafeBytes(of: entry.pointee.d_name) {
                    String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
                }
                guard let number = Int32(name) else { continue }
                var target = [CChar](repeating: 0, count: 64)
                let length = readlink("\(fds)/\(number)", &target, target.count - 1)
                guard length > 0 else { continue }
                let text = String(
                    decoding: target[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if lock == nil, text.hasPrefix(lockTarget) {
                    let fd = open("\(fds)/\(number)", O_RDONLY | O_CLOEXEC)
                    if fd >= 0 { lock = fd }
                    continue
                }
                guard pipe == nil, text.hasPrefix("pipe:"),
                    let info = try? String(
                        contentsOfFile: "/proc/\(child)/fdinfo/\(number)", encoding: .utf8),
                    let flags = info.split(separator: "\n").first(where: { $0.hasPrefix("flags:") }
                    )?
                    .split(separator: "\t").last.flatMap({
                        Int32($0.trimmingCharacters(in: .whitespaces), radix: 8)
                    }),
                    flags & O_ACCMODE == O_RDONLY
                else { continue }
                let fd = open("\(fds)/\(number)", O_RDONLY | O_NONBLOCK | O_CLOEXEC)
                if fd >= 0 { pipe = fd }
            }
            if let pipe { return (pipe, lock ?? pipe) }
            if let lock { close(lock) }
        }
        return nil
    }

    /// The log, its rotated part and their time indexes.
    func remove(_ path: String) {
        let rotated = LogIndexLayout.rotatedName(ofLog: path)
        for name in [
            path, rotated, LogIndexLayout.indexName(ofLog: path),
            LogIndexLayout.indexName(ofLog: rotated),
        ] {
            unlink(name)
        }
    }
}
