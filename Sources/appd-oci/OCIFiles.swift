import AppdBase
import Foundation
import Glibc

/// Reading and writing the small files an engine and appd-oci exchange: bounded reads, and
/// writes that are whole or absent (a temporary name, then rename), as the shim and conmon
/// read the pid file the moment `create` returns. Not fsynced: this is state of the running
/// boot, kept where engines keep it, on /run's tmpfs (runc's /run/runc does the same); its
/// containers end with the boot a crash would end. On a state root on disk an fsync made each
/// `create` and `delete` wait for the disk (perf sched, bench-oci).
enum OCIFiles {
    static func read(_ path: String, limit: Int, what: String) throws -> Data {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw AppdError.system("cannot open \(what) \(path)") }
        defer { close(fd) }
        switch readAll(fd, limit: limit + 1) {
        case .success(let bytes) where bytes.count > limit:
            throw AppdError(.invalidConfig, "\(what) \(path) is larger than \(limit) bytes")
        case .success(let bytes): return Data(bytes)
        case .failure(let error):
            throw AppdError.system("cannot read \(what) \(path)", errno: error.rawValue)
        }
    }

    /// Reads `path` from stdin when it is `-`.
    static func readInput(_ path: String, limit: Int, what: String) throws -> Data {
        path == "-"
            ? try read("/dev/stdin", limit: limit, what: what)
            : try read(
                path, limit: limit, what: what)
    }

    /// Writes `bytes` to `path` whole: a temporary file beside it, renamed over it.
    static func writeAtomically(_ path: String, _ bytes: [UInt8], mode: mode_t = 0o600) throws {
        let directory = (path as NSString).deletingLastPathComponent
        let temporary = "\(directory.isEmpty ? "." : directory)/.\(UUID().uuidString).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw AppdError.system("cannot create \(temporary)") }
        let written = bytes.withUnsafeBytes { writeAll(fd, $0) }
        let ok = close(fd) == 0 && (try? written.get()) != nil
        guard ok, rename(temporary, path) == 0 else {
            let error = AppdError.system("cannot write \(path)")
            unlink(temporary)
            throw error
        }
    }

    /// Writes an engine's `--pid-file`: the digits of `pid`, no newline (what the shim and
    /// conmon parse), whole or not at all.
    static func writePidFile(_ path: String, _ pid: pid_t) throws {
        try writeAtomically(path, Array(String(pid).utf8), mode: 0o644)
    }
}
