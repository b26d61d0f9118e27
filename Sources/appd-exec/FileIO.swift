import Glibc

/// Blocking reads and writes on raw fds, retried on EINTR. No Foundation in the launcher.
enum FileIO {
    /// Reads `fd` to end of file; refuses more than `limit` bytes.
    static func readAll(_ fd: Int32, limit: Int, step: String) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw LaunchFailure.system(step, "cannot read fd \(fd)")
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: buffer[0..<count])
            if bytes.count > limit {
                throw LaunchFailure(step, "fd \(fd) holds more than \(limit) bytes")
            }
        }
    }

    /// Writes all of `bytes`; false if the fd refused them.
    @discardableResult
    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes {
                write(fd, $0.baseAddress! + offset, $0.count - offset)
            }
            if count < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += count
        }
        return true
    }

    @discardableResult
    static func writeAll(_ fd: Int32, _ text: String) -> Bool {
        writeAll(fd, Array(text.utf8))
    }

    /// Creates `path` as an empty file if it does not exist yet (a mount point for a file).
    static func touch(_ path: String, mode: mode_t, step: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY, mode)
        try sys(fd, step, "cannot create \(path)")
        close(fd)
    }

    /// `mkdir -p`: creates every missing directory of `path` (absolute) with `mode`.
    static func makeDirectories(_ path: String, mode: mode_t, step: String) throws {
        var current = ""
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, mode) != 0 && errno != EEXIST {
                throw LaunchFailure.system(step, "cannot create directory \(current)")
            }
        }
    }

    /// The directory holding `path` (absolute): `/a/b` for `/a/b/c`, `/` for `/a`.
    static func parent(of path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")), slash != path.startIndex
        else { return "/" }
        return String(path[..<slash])
    }
}
