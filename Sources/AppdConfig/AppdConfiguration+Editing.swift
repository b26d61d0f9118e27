import AppdBase
import Foundation
import Glibc

/// `appd override` edits the admin's own file: one `[App ID]` section is rewritten, every
/// other line (comments, blank lines, other sections, the order of keys the admin chose) stays
/// byte for byte, and the file is replaced atomically so a crash leaves the old or the new
/// file, never half of one.
extension AppdConfiguration {
    /// `text` with the `[App id]` section saying `settings` (keys in that order). Keys the
    /// section already has keep their place and spelling, comments inside it stay, keys not in
    /// `settings` go, new keys follow the section's last key. Empty `settings` removes the
    /// section's header and keys (comments after its last key stay: they may belong to the
    /// next section). A file without the section gets it appended.
    public static func replacingApp(
        _ id: String, with settings: [(key: String, value: String)], in text: String
    ) -> String {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let endsWithNewline = text.isEmpty || text.hasSuffix("\n")
        if endsWithNewline, !text.isEmpty { lines.removeLast() }
        if text.isEmpty { lines = [] }

        func sectionName(_ line: String) -> String? {
            let trimmed = line.trimmingWhitespace()
            guard trimmed.hasPrefix("["), trimmed.hasSuffix("]"), trimmed.count >= 2 else {
                return nil
            }
            return String(trimmed.dropFirst().dropLast())
        }
        func isApp(_ name: String) -> Bool {
            guard name.hasPrefix("App ") else { return false }
            return AppID(name.dropFirst(4).trimmingWhitespace()) == AppID(id)
        }
        func key(_ line: String) -> String? {
            let trimmed = line.trimmingWhitespace()
            guard !trimmed.isEmpty, !trimmed.hasPrefix("#"), !trimmed.hasPrefix(";"),
                let equals = trimmed.firstIndex(of: "=")
            else { return nil }
            return trimmed[..<equals].trimmingWhitespace()
        }

        guard let header = lines.firstIndex(where: { sectionName($0).map(isApp) ?? false }) else {
            guard !settings.isEmpty else { return text }
            var result = lines
            if let last = result.last, !last.trimmingWhitespace().isEmpty {
                result.append("")
            }
            result.append("[App \(id)]")
            result += settings.map { "\($0.key)=\($0.value)" }
            return result.joined(separator: "\n") + "\n"
        }
        let end =
            lines[(header + 1)...].firstIndex(where: { sectionName($0) != nil }) ?? lines.count
        let body = Array(lines[(header + 1)..<end])

        var newSection: [String] = []
        if settings.isEmpty {
            // Keep what follows the last key (comments and blank lines before the next header).
            let lastKey = body.lastIndex(where: { key($0) != nil }) ?? -1
            newSection = Array(body[(lastKey + 1)...])
        } else {
            newSection.append(lines[header])
            var written = Set<String>()
            var lastKeyLine = 0
            for line in body {
                guard let name = key(line) else {
                    newSection.append(line)
                    continue
                }
                guard !written.contains(name),
                    let setting = settings.first(where: { $0.key == name })
                else { continue }
                let indent = String(line.prefix { $0 == " " || $0 == "\t" })
                newSection.append("\(indent)\(name)=\(setting.value)")
                written.insert(name)
                lastKeyLine = newSection.count - 1
            }
            let added = settings.filter { !written.contains($0.key) }.map {
                "\($0.key)=\($0.value)"
            }
            newSection.insert(contentsOf: added, at: lastKeyLine + 1)
        }
        var result = Array(lines[..<header]) + newSection + Array(lines[end...])
        // A removed section at the end leaves no trailing blank line behind.
        while settings.isEmpty, end == lines.count, let last = result.last,
            last.trimmingWhitespace().isEmpty
        {
            result.removeLast()
        }
        let joined = result.joined(separator: "\n")
        return joined.isEmpty ? "" : joined + (endsWithNewline ? "\n" : "")
    }

    /// Replaces the file at `path` (through a symlink: the file it points to) with `text`:
    /// a temporary file in the same directory with the old file's owner and mode, fsync,
    /// rename over the old one, fsync of the directory.
    public static func writeAtomically(_ text: String, to path: String) throws {
        var target = path
        if let resolved = realpath(path, nil) {
            target = String(cString: resolved)
            free(resolved)
        }
        let directory = Self.directory(of: target)
        var old = stat()
        let exists = stat(target, &old) == 0
        var template = Array("\(directory)/.appd.conf.XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { buffer -> Int32 in
            guard let base = buffer.baseAddress else { return -1 }
            return mkstemp(base)
        }
        guard fd >= 0 else { throw AppdError.system("create a temporary file in \(directory)") }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        let temporary = String(cString: template)
        var renamed = false
        defer {
            if !renamed { unlink(temporary) }
        }
        do {
            defer { close(fd) }
            let bytes = Array(text.utf8)
            if case .failure(let error) = bytes.withUnsafeBytes({ writeAll(fd, $0) }) {
                throw AppdError.system("write \(temporary)", errno: error.rawValue)
            }
            guard fchmod(fd, exists ? old.st_mode & 0o7777 : 0o644) == 0 else {
                throw AppdError.system("chmod \(temporary)")
            }
            if exists, fchown(fd, old.st_uid, old.st_gid) != 0 {
                throw AppdError.system("chown \(temporary)")
            }
            guard fsync(fd) == 0 else { throw AppdError.system("fsync \(temporary)") }
        }
        guard rename(temporary, target) == 0 else {
            throw AppdError.system("rename \(temporary) to \(target)")
        }
        renamed = true
        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            fsync(directoryFD)
            close(directoryFD)
        }
    }

    /// The directory part of `path` (`.` for a bare name). Foundation's
    /// `deletingLastPathComponent` traps on some short relative names (`t`), and a config path
    /// is user input.
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let directory = String(path[..<slash])
        return directory.isEmpty ? "/" : directory
    }

    /// Holds an exclusive lock on the directory of `path` while `body` runs, so two `appd
    /// override` runs do not each rewrite the file from the same old text.
    public static func withEditLock<R>(_ path: String, _ body: () throws -> R) throws -> R {
        let directory = Self.directory(of: path)
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            throw AppdError.system(
                "open the folder of \(path), \(directory)",
                hint: errno == ENOENT
                    ? "create it (mkdir -p \(directory)), or name another file with --config" : nil)
        }
        defer { close(fd) }
        guard retryingInterrupts({ flock(fd, LOCK_EX) }) == 0 else {
            throw AppdError.system("lock \(directory)")
        }
        return try body()
    }
}
