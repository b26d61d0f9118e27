import AppdBase
import Glibc

/// The few file operations cgroups need, each one system call with its errno kept, because
/// cgroupfs reports everything (limits refused, delegation missing, "no internal processes")
/// through the errno of a single `write` or `mkdir`.
enum CgroupFS {
    /// An errno value, kept apart from the message so callers can decide on it.
    struct Failure: Error, Equatable {
        var code: Int32
        init(_ code: Int32) { self.code = code }
    }

    /// The whole of a small file (cgroupfs files are at most a few pages).
    static func read(_ path: String) -> Result<String, Failure> {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(Failure(errno)) }
        defer { close(fd) }
        return readAll(fd)
    }

    static func readAll(_ fd: Int32, from offset: Int = 0) -> Result<String, Failure> {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var position = offset
        while true {
            let n = buffer.withUnsafeMutableBytes { buffer in
                retryingInterrupts { pread(fd, buffer.baseAddress, buffer.count, position) }
            }
            if n < 0 { return .failure(Failure(errno)) }
            if n == 0 { break }
            bytes += buffer[0..<n]
            position += n
        }
        return .success(String(decoding: bytes, as: UTF8.self))
    }

    /// One `write` of `value`: cgroupfs applies each write as a whole or refuses it.
    static func write(_ value: String, to path: String) -> Result<Void, Failure> {
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(Failure(errno)) }
        defer { close(fd) }
        let bytes = Array(value.utf8)
        let n = bytes.withUnsafeBytes { buffer in
            retryingInterrupts { Glibc.write(fd, buffer.baseAddress, buffer.count) }
        }
        guard n == bytes.count else { return .failure(Failure(n < 0 ? errno : EIO)) }
        return .success(())
    }

    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    /// The pids listed in a `cgroup.procs` file.
    static func pids(_ path: String) -> Result<[pid_t], Failure> {
        read(path).map { text in text.split(separator: "\n").compactMap { pid_t($0) } }
    }

    /// `key value` lines (cgroup.events, memory.events, pids.events, memory.oom_control).
    static func keyedValues(_ text: String) -> [String: Int64] {
        var values: [String: Int64] = [:]
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            if fields.count == 2, let value = Int64(fields[1]) { values[String(fields[0])] = value }
        }
        return values
    }
}

extension AppdError {
    /// A failed cgroupfs operation, with a hint when the cause is most likely the host: no
    /// delegation (EACCES/EPERM/EROFS), a controller not enabled for the subtree (ENOENT on an
    /// interface file), or the v2 "no internal processes" rule (EBUSY on subtree_control).
    static func cgroup(_ step: String, _ path: String, _ error: CgroupFS.Failure) -> AppdError {
        let hint: String?
        let name = path.split(separator: "/").last.map(String.init) ?? path
        switch error.code {
        case EACCES, EPERM, EROFS:
            let directory = name.contains(".") ? parentDirectory(of: path) : path
            hint =
                "no write access to \(directory): is appd's cgroup delegated "
                + "(Delegate=yes in appd.service), and is appd running as root?"
        case ENOENT where name.contains(".") && !name.hasPrefix("cgroup."):
            let controller = name.split(separator: ".").first.map(String.init) ?? name
            hint =
                "the \(controller) controller is not available here: on cgroup v2 it must be "
                + "listed in the parent's cgroup.subtree_control (and the kernel built with it)"
        case EBUSY where name == "cgroup.subtree_control":
            hint =
                "cgroup v2 allows controllers only in cgroups without processes: the daemon "
                + "must first move itself into a leaf (CgroupDriver.prepare() does this)"
        case ENOSPC where name == "cgroup.procs", EAGAIN where name == "cgroup.procs":
            hint = "the cgroup may be at its pids.max, or have no memory nodes/cpus (cpuset)"
        default:
            hint = nil
        }
        return AppdError.system("\(step) \(path)", errno: error.code, hint: hint)
    }
}

func parentDirectory(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    return slash == path.startIndex ? "/" : String(path[..<slash])
}
