import Glibc

/// A failed system call's errno, as a value (swift-system's `Errno`, reduced to what appd uses).
public struct Errno: Error, Equatable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's errno now.
    public static var current: Errno { Errno(rawValue: Glibc.errno) }

    public static let interrupted = Errno(rawValue: EINTR)
    public static let wouldBlock = Errno(rawValue: EAGAIN)

    public var name: String { errnoName(rawValue) }
    public var description: String { errnoText(rawValue) }
}

/// Runs a system call wrapper that returns -1 and sets errno on failure, again while it fails
/// with EINTR (when `retryOnInterrupt`), and returns its value or its errno: swift-system's
/// `valueOrErrno(retryOnInterrupt:)`. The one EINTR loop of appd.
@inlinable
public func valueOrErrno<Value: FixedWidthInteger>(
    retryOnInterrupt: Bool = true, _ call: () -> Value
) -> Result<Value, Errno> {
    while true {
        let value = call()
        if value != -1 { return .success(value) }
        let error = Errno.current
        if retryOnInterrupt && error == .interrupted { continue }
        return .failure(error)
    }
}

/// The same for a call whose success is all that matters (close-free `flock`, `fsync`, ...).
@inlinable
public func nothingOrErrno<Value: FixedWidthInteger>(
    retryOnInterrupt: Bool = true, _ call: () -> Value
) -> Result<Void, Errno> {
    valueOrErrno(retryOnInterrupt: retryOnInterrupt, call).map { _ in () }
}

/// Runs `call` again while it fails with EINTR and returns what it returned last, errno as that
/// call left it: for the C-style call sites that go on to read `errno` themselves.
@inlinable
public func retryingInterrupts<Value: FixedWidthInteger>(_ call: () -> Value) -> Value {
    while true {
        let value = call()
        if value == -1 && Glibc.errno == EINTR { continue }
        return value
    }
}

/// Writes all of `bytes` to `fd`, retrying short writes and EINTR. The errno of the write that
/// failed, if one did (EIO for a write that wrote nothing, which would otherwise spin).
public func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Result<Void, Errno> {
    var offset = 0
    while offset < bytes.count {
        let result = valueOrErrno {
            write(fd, bytes.baseAddress.map { $0 + offset }, bytes.count - offset)
        }
        switch result {
        case .success(0): return .failure(Errno(rawValue: EIO))
        case .success(let written): offset += written
        case .failure(let error): return .failure(error)
        }
    }
    return .success(())
}

/// Reads from `fd` until end of file or `limit` bytes, retrying EINTR. `.success` holds at most
/// `limit` bytes; whether more followed is the caller's to ask (read `limit + 1`).
public func readAll(_ fd: Int32, limit: Int) -> Result<[UInt8], Errno> {
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while bytes.count < limit {
        let wanted = min(chunk.count, limit - bytes.count)
        let result = chunk.withUnsafeMutableBytes { buffer in
            valueOrErrno { read(fd, buffer.baseAddress, wanted) }
        }
        switch result {
        case .success(0): return .success(bytes)
        case .success(let count): bytes += chunk[..<count]
        case .failure(let error): return .failure(error)
        }
    }
    return .success(bytes)
}
