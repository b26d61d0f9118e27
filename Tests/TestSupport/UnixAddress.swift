import Foundation
import Glibc

/// A `sockaddr_un` for a socket file (`path`) or, with `abstract`, a name in the abstract
/// namespace (no file; a leading NUL): one place where the tests build one.
public struct UnixAddress {
    public private(set) var storage = sockaddr_un()
    public let length: socklen_t

    /// Nil when the path does not fit `sun_path`.
    public init?(_ path: String, abstract: Bool = false) {
        let bytes = (abstract ? [0] : []) + Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: storage.sun_path) else { return nil }
        storage.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &storage.sun_path) { $0.copyBytes(from: bytes) }
        // An abstract name is exactly its bytes; a path may end at its NUL.
        length =
            abstract
            ? socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
            : socklen_t(MemoryLayout<sockaddr_un>.size)
    }

    public func bind(_ fd: Int32) -> Int32 {
        withUnsafePointer(to: storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) }
        }
    }

    public func connect(_ fd: Int32) -> Int32 {
        withUnsafePointer(to: storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, length) }
        }
    }
}

/// A close-on-exec unix socket of `type` (SOCK_STREAM, SOCK_DGRAM, ...) bound to `address`.
public func boundUnixSocket(_ type: __socket_type, _ address: UnixAddress) throws -> Int32 {
    let fd = socket(AF_UNIX, Int32(type.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw lastErrno() }
    guard address.bind(fd) == 0 else {
        let error = lastErrno()
        close(fd)
        throw error
    }
    return fd
}

/// The errno of the call that just failed, as an Error.
public func lastErrno() -> POSIXError { POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }

/// A TCP listener on the host's 127.0.0.1 (an ephemeral port), closed on deinit.
public final class HostListener {
    public let fd: Int32
    public let port: UInt16

    public init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 8) == 0 else { throw lastErrno() }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.port = UInt16(bigEndian: address.sin_port)
    }

    deinit { close(fd) }
}
