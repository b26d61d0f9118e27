import AppBundle
import AppdAPI
import AppdBase
import Foundation
import Glibc

/// The folder of instance records and launcher status files (tmpfs under /run: they describe
/// processes, which do not survive a reboot either).
struct RecordStore: Sendable {
    let directory: String

    init(runtimeDirectory: String) throws {
        directory = "\(runtimeDirectory)/instances"
        // The runtime directory holds the socket, which callers must reach (its own mode and
        // group decide who may connect); the records are root's.
        for (path, mode) in [(runtimeDirectory, mode_t(0o755)), (directory, mode_t(0o700))] {
            if mkdir(path, mode) != 0 && errno != EEXIST { throw AppdError.system("mkdir \(path)") }
            guard chmod(path, mode) == 0 else { throw AppdError.system("chmod \(path)") }
        }
    }

    func statusPath(_ id: String) -> String { "\(directory)/\(id).status" }
    func recordPath(_ id: String) -> String { "\(directory)/\(id).json" }

    /// The file the launcher writes the app's fate to. It outlives the daemon, unlike a pipe.
    func openStatus(_ id: String) throws -> Int32 {
        let fd = open(statusPath(id), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw AppdError.system("open \(statusPath(id))") }
        return fd
    }

    func readStatus(_ id: String) -> String? {
        guard let data = FileManager.default.contents(atPath: statusPath(id)), !data.isEmpty else {
            return nil
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// Written to a temporary name and renamed: a crash of the daemon leaves the old record or
    /// the new one. Not fsync'd: a record describes processes, which a crash of the machine
    /// ends too (and the runtime directory is a tmpfs there); what must survive is a crash of
    /// appd, and the page cache does. (An fsync per state change cost 0.5–5 ms of each launch.)
    ///
    /// A record that exists already is overwritten in place when the new text fits one page:
    /// a single `pwrite` at offset 0 of at most 4096 bytes, padded with spaces to the old length
    /// (JSON allows trailing whitespace), which a crash of appd cannot tear. Replacing the file
    /// instead freed an inode per state change: on an ext4 without a journal (this machine
    /// kind's /run), the inode allocator skips every inode freed in the last seconds one by one,
    /// so 1,000 launches in a burst spent a fifth of the machine's CPU in `find_inode_bit`.
    func save(_ instance: Instance) throws {
        let data = try APICoding.encoder().encode(InstanceRecord(instance))
        let path = recordPath(instance.id)
        if Self.overwrite(path, with: data) { return }
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw AppdError.system("open \(temporary)") }
        var written = 0
        while written < data.count {
            let count = data[(data.startIndex + written)...].withUnsafeBytes { bytes in
                retryingInterrupts { write(fd, bytes.baseAddress, bytes.count) }
            }
            guard count > 0 else {
                let code = errno
                close(fd)
                unlink(temporary)
                throw AppdError.system("write \(temporary)", errno: code)
            }
            written += count
        }
        guard close(fd) == 0, rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw AppdError.system("write \(path)", errno: code)
        }
    }

    /// The largest record written in place: one page, which one `pwrite` fills whole.
    static let inPlaceLimit = 4096

    /// Overwrites an existing record in place; false (nothing written, or a write that did not
    /// complete) leaves the caller to replace the file.
    static func overwrite(_ path: String, with data: Data) -> Bool {
        guard data.count <= inPlaceLimit else { return false }
        let fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG,
            status.st_size <= Int64(inPlaceLimit)
        else { return false }
        var bytes = [UInt8](data)
        let old = Int(status.st_size)
        if bytes.count < old {
            bytes.append(contentsOf: repeatElement(UInt8(ascii: " "), count: old - bytes.count))
        }
        let written = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return written == bytes.count
    }

    func remove(_ id: String) {
        unlink(recordPath(id))
        unlink(statusPath(id))
        // The read offset of the journal forwarding daemons before the output relay kept
        // (docs/app-output.md): gone with its instance on hosts that upgraded.
        unlink("\(directory)/\(id).forwarded")
    }

    /// Every record (of either version), as the instance it describes; unreadable ones are
    /// skipped and returned by name.
    func loadAll() -> (records: [Instance], unreadable: [String]) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        var records: [Instance] = []
        var unreadable: [String] = []
        for name in names.sorted() where name.hasSuffix(".json") {
            guard let data = FileManager.default.contents(atPath: "\(directory)/\(name)"),
                let record = try? InstanceRecord.decode(data)
            else {
                unreadable.append(name)
                continue
            }
            records.append(record)
        }
        return (records, unreadable)
    }
}

enum ProcessInfoReader {
    /// Field 22 (starttime, clock ticks since boot) of /proc/PID/stat: with the pid, it names
    /// one process for the life of the system.
    static func startTime(of pid: pid_t) -> UInt64? {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/stat") else {
            return nil
        }
        let text = String(decoding: data, as: UTF8.self)
        // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state), so field 22 is fields[19].
        return fields.count > 19 ? UInt64(fields[19]) : nil
    }
}
