import AppdAPI
import Glibc

/// Where instances' output goes besides their log file: under systemd, the journal
/// (AppdServer's `JournalOutputSink`), so that `journalctl APPD_APP=<id>` shows it. Lines come
/// in the order the app wrote them, without their newline.
public protocol InstanceOutputSink: Sendable {
    /// Takes the first lines it can, in order, and says how many: the rest come again in the
    /// next pass (a journal that falls behind delays lines, it does not lose them).
    func write(lines: [String], of instance: APIInstance) -> Int
}

/// Follows the instances' log files for a sink: each pass hands on the complete lines appended
/// since the last one. The offset reached is kept in `<instance>.forwarded` beside the record, so
/// a daemon started after a restart or a crash resumes where the last one stopped: no line twice,
/// none skipped (but for the lines a rotation truncates between a pass and its copy, which the
/// log file loses too).
///
/// The app writes the file, not a pipe to the daemon (InstanceLogs), so this reads after the
/// fact: once every pass of the Supervisor's log loop (250 ms), bounded per pass so that one
/// chatty app cannot hold the actor.
final class OutputForwarder {
    let sink: any InstanceOutputSink
    let directory: String
    private var offsets: [String: Int64] = [:]

    /// A line longer than this is handed on in pieces (journald's own line limit is 48 KiB).
    static let maxLine = 16 << 10
    /// At most this much of one log per pass; the rest waits for the next pass.
    static let maxPerPass = 1 << 20

    init(sink: any InstanceOutputSink, directory: String) {
        self.sink = sink
        self.directory = directory
    }

    func offsetPath(_ id: String) -> String { "\(directory)/\(id).forwarded" }

    /// Hands on what `instance` wrote since the last pass: complete lines, or with `final` (it
    /// has ended) also a last line without a newline.
    func forward(_ instance: APIInstance, logPath: String, final: Bool = false) {
        let fd = open(logPath, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return }
        let size = Int64(info.st_size)
        var offset = offset(instance.id)
        // Shorter than where we were: rotated by a daemon that stopped before its next pass.
        if size < offset { offset = 0 }
        // An instance that ended is read to its end (giving a slow sink up to a second); a
        // running one a bounded part per pass.
        var stalls = 0
        while size > offset, stalls < 50 {
            var buffer = [UInt8](repeating: 0, count: Int(min(size - offset, Int64(Self.maxPerPass))))
            let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(offset)) }
            guard count > 0 else { break }
            let lines = Self.split(buffer[..<count], final: final && offset + Int64(count) == size)
            guard !lines.isEmpty else { break }
            let taken = sink.write(lines: lines.map(\.text), of: instance)
            if taken > 0 {
                offset += Int64(lines[taken - 1].end)
                setOffset(offset, for: instance.id)
            }
            if !final { break }
            if taken < lines.count { stalls += 1 }
        }
    }

    /// Complete lines of `bytes`, each with where it ends (past its newline) counted from the
    /// start of `bytes`. A tail without a newline counts only when `final`, or once it is
    /// `maxLine` long.
    static func split(_ bytes: ArraySlice<UInt8>, final: Bool) -> [(text: String, end: Int)] {
        var lines: [(text: String, end: Int)] = []
        var start = bytes.startIndex
        var index = start
        while index < bytes.endIndex {
            if bytes[index] == UInt8(ascii: "\n") || index - start == maxLine {
                let text = String(decoding: bytes[start..<index], as: UTF8.self)
                if bytes[index] == UInt8(ascii: "\n") { index += 1 }
                lines.append((text, index - bytes.startIndex))
                start = index
            } else {
                index += 1
            }
        }
        if final, start < bytes.endIndex {
            lines.append((String(decoding: bytes[start...], as: UTF8.self), bytes.count))
        }
        return lines
    }

    /// The log was truncated by a rotation: it starts again from its beginning.
    func rotated(_ id: String) { setOffset(0, for: id) }

    /// The instance is over and its output all handed on.
    func finish(_ id: String) {
        offsets[id] = nil
        unlink(offsetPath(id))
    }

    private func offset(_ id: String) -> Int64 {
        if let known = offsets[id] { return known }
        var text = [UInt8](repeating: 0, count: 32)
        let fd = open(offsetPath(id), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        var value: Int64 = 0
        if fd >= 0 {
            let count = read(fd, &text, text.count)
            close(fd)
            if count > 0 { value = Int64(String(decoding: text[..<count], as: UTF8.self)) ?? 0 }
        }
        offsets[id] = value
        return value
    }

    private func setOffset(_ value: Int64, for id: String) {
        offsets[id] = value
        let fd = open(offsetPath(id), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return }
        let text = Array(String(value).utf8)
        _ = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }
}
