import Foundation

/// The one error type of AppRuntime. It lives here, not in the daemon's `AppdError`, because an
/// app links only this library (and Foundation), never the daemon's modules.
public struct AppRuntimeError: Error, CustomStringConvertible, Sendable, Equatable {
    public enum Code: String, Sendable {
        /// The environment lacks a variable the runtime needs (run outside appd, or a bad launch).
        case missingEnvironment
        /// A variable is set but unusable (`APPD_LIFECYCLE_FD=abc`, a relative `HOME`).
        case invalidEnvironment
        case notFound
        /// A file holds something other than what it should (a corrupt plist, a bad strings file).
        case invalidData
        /// A value cannot be stored in a property list.
        case invalidValue
        /// A system call failed; `errno` says how.
        case io
    }

    public var code: Code
    public var message: String
    public var errno: Int32?

    public init(_ code: Code, _ message: String, errno: Int32? = nil) {
        self.code = code
        self.message = message
        self.errno = errno
    }

    /// A failed system call: `"rename .x.plist.tmp -> x.plist: Permission denied"`.
    static func system(_ step: String, errno: Int32 = Glibc.errno) -> AppRuntimeError {
        AppRuntimeError(.io, "\(step): \(String(cString: strerror(errno)))", errno: errno)
    }

    public var description: String { message }
}

/// Diagnostics go to stderr, which appd captures into the instance's log: the runtime has no
/// logger of its own to configure, and an app's stdout stays its own.
func runtimeLog(_ message: String) {
    FileHandle.standardError.write(Data("AppRuntime: \(message)\n".utf8))
}
