import Glibc

/// Blocking reads and writes on raw fds, retried on EINTR. No Foundation in the launcher.
enum FileIO {
    /// Reads `fd` to end of file; refuses more than `limit` bytes. Reads straight into a
    /// growing buffer that is never zero-filled (a profile is a few KiB; memset of a fixed
    /// 16 KiB buffer per call showed in the launcher's profile).
    static func readAll(_ fd: Int32, limit: Int, step: String) throws -> [UInt8] {
        var capacity = 4096
        var count = 0
        var buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 1)
        defer { buffer.deallocate() }
        while true {
            if count == capacity {
                let larger = UnsafeMutableRawPointer.allocate(byteCount: 2 * capacity, alignment: 1)
                larger.copyMemory(from: buffer, byteCount: count)
                buffer.deallocate()
                buffer = larger
                capacity *= 2
            }
            let read = Glibc.read(fd, buffer + count, capacity - count)
            if read < 0 {
                if errno == EINTR { continue }
                throw LaunchFailure.system(step, "cannot read fd \(fd)")
            }
            if read == 0 { return [UInt8](UnsafeRawBufferPointer(start: buffer, count: count)) }
            count += read
            if count > limit {
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
    /// Opened for reading: an existing file on a read-only mount (an image's `/etc` bound
    /// read-only) is a mount point as it is, where opening it to write fails with EROFS.
    static func touch(_ path: String, mode: mode_t, step: String) throws {
        let fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOCTTY, mode)
        try sys(fd, step, "cannot create \(path)")
        close(fd)
    }

    /// `mkdir -p`: creates every missing directory of `path` (absolute) with `mode`. Walks a C
    /// copy of the path, cutting it at each `/` in place (no array of components: its generic
    /// metadata is a runtime lookup on every launch).
    static func makeDirectories(_ path: String, mode: mode_t, step: String) throws {
        guard let copy = strdup(path) else {
            throw LaunchFailure.system(step, "cannot create directory \(path)")
        }
        defer { free(copy) }
        let length = strlen(copy)
        var index = 1
        while index <= length {
            // The end of a component: a slash after a non-slash, or the end of the path.
            if (index == length || copy[index] == 0x2F) && copy[index - 1] != 0x2F {
                let saved = copy[index]
                copy[index] = 0
                if mkdir(copy, mode) != 0 && errno != EEXIST {
                    throw LaunchFailure.system(
                        step, "cannot create directory \(String(cString: copy))")
                }
                copy[index] = saved
            }
            index += 1
        }
    }

    /// `mode` in octal digits, without a leading 0. Not `String(mode, radix: 8)`: that generic
    /// initializer looks up BinaryInteger's associated types at run time, in PID 1 on every
    /// launch.
    static func octal(_ mode: mode_t) -> String {
        var digits: [UInt8] = []
        var rest = mode
        repeat {
            digits.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest & 7))
            rest >>= 3
        } while rest != 0
        digits.reverse()
        return String(decoding: digits, as: UTF8.self)
    }

    /// The directory holding `path` (absolute): `/a/b` for `/a/b/c`, `/` for `/a`.
    static func parent(of path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")), slash != path.startIndex
        else { return "/" }
        return String(path[..<slash])
    }
}
