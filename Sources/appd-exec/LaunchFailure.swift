import CLinux
import Glibc

/// Why the sandbox could not be built. `description` is what follows `appd-exec: ` on stderr and
/// `error ` on the status fd, so it is always one line: `STEP: MESSAGE (ERRNO)`.
struct LaunchFailure: Error, CustomStringConvertible {
    var step: String
    var message: String
    var errno: Int32?

    init(_ step: String, _ message: String, errno: Int32? = nil) {
        self.step = step
        self.message = message
        self.errno = errno
    }

    /// A failed system call: records the errno it left behind.
    static func system(_ step: String, _ message: String) -> LaunchFailure {
        LaunchFailure(step, message, errno: Glibc.errno)
    }

    var description: String {
        var text = "\(step): \(message)"
        if let errno { text += " (\(errnoName(errno)))" }
        return singleLine(text)
    }
}

/// `ENOENT` rather than "No such file or directory": the name is what one greps the kernel for.
func errnoName(_ code: Int32) -> String {
    if let name = appd_errno_name(code) { return String(cString: name) }
    return "errno \(code)"
}

/// Profile values may hold any byte; a report line must stay one line.
func singleLine(_ text: String) -> String {
    String(
        decoding: text.utf8.map { $0 < 0x20 || $0 == 0x7F ? UInt8(ascii: "?") : $0 }, as: UTF8.self)
}

/// Runs a system call wrapper and throws `LaunchFailure.system` when it returns a negative value.
@discardableResult
func sys<T: BinaryInteger>(
    _ result: T, _ step: String, _ message: @autoclosure () -> String
) throws -> T {
    if result < 0 { throw LaunchFailure.system(step, message()) }
    return result
}

/// Whatever was thrown, as the one-line failure text.
func failureText(_ error: Error) -> String {
    if let failure = error as? LaunchFailure { return failure.description }
    return singleLine("internal: \(error)")
}
