import AppBundle
import CLinux
import Glibc

/// Each instance's stdout and stderr: `<state root>/logs/<app>/<instance>.log` and `.log.1`,
/// written and rotated (by rename) by the instance's output relay in `appd-exec`
/// (docs/app-output.md), never by the app, which holds only a pipe. The daemon makes the pipe
/// and opens the folder for the relay, reads the files for `appctl logs`, and keeps the logs of
/// the last `KeepExited` instances. Beside each file the relay keeps its time index
/// (`.log.idx`, `.log.1.idx`; LogTimeIndex), which counts against the same bound.
struct InstanceLogs: Sendable {
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

    /// The log, its rotated part and their time indexes.
    func remove(_ path: String) {
        for name in [path, path + ".1", path + ".idx", path + ".1.idx"] { unlink(name) }
    }
}
