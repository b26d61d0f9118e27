import AppdBase

#if canImport(Glibc)
    import Glibc
#endif

/// Why talking to the socket failed, before it is put in words for a request.
enum TransportError: Error, Equatable {
    /// `connect` failed: nobody listening (`ENOENT`, `ECONNREFUSED`), not allowed (`EACCES`)...
    case connect(errno: Int32)
    /// The path does not fit in `sockaddr_un.sun_path`.
    case pathTooLong(bytes: Int, limit: Int)
    case socket(errno: Int32)
    case read(errno: Int32)
    case write(errno: Int32)
    /// `SO_RCVTIMEO`/`SO_SNDTIMEO` ran out.
    case timedOut

    /// The daemon went away (closed or reset the connection) while we were writing: it may
    /// have answered first, so the answer is worth reading.
    var peerClosed: Bool {
        switch self {
        case .write(let code): code == EPIPE || code == ECONNRESET
        default: false
        }
    }
}

/// One blocking connection to a Unix stream socket, closed when the value goes away.
///
/// Writes use `MSG_NOSIGNAL`: a daemon that closes early must turn into an error, never into a
/// SIGPIPE that kills the CLI before it can print what the daemon said.
final class UnixConnection {
    let fd: Int32
    /// The ssh behind a `--host` connection (RemoteHost.swift); nil for a local socket.
    let remote: RemoteProcess?
    /// Whether the daemon's side sent anything: if not, ssh is asked why.
    private(set) var receivedAnything = false

    /// An already connected socket: one end of the socketpair whose other end ssh relays.
    init(connected fd: Int32, timeout: Double?, remote: RemoteProcess?) {
        self.fd = fd
        self.remote = remote
        if let timeout { Self.setTimeout(fd, seconds: timeout) }
    }

    init(path: String, timeout: Double?) throws(TransportError) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let limit = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < limit, !bytes.contains(0) else {
            throw .pathTooLong(bytes: bytes.count, limit: limit - 1)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .socket(errno: errno) }
        self.fd = fd
        remote = nil
        if let timeout { Self.setTimeout(fd, seconds: timeout) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + 1)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) }
        }
        if result != 0 {
            // A connect interrupted by a signal goes on in the background: wait for it and ask
            // how it ended rather than connecting twice.
            guard errno == EINTR else { throw .connect(errno: errno) }
            try Self.finishConnect(fd)
        }
    }

    private static func finishConnect(_ fd: Int32) throws(TransportError) {
        var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        while poll(&entry, 1, -1) < 0 {
            guard errno == EINTR else { throw .connect(errno: errno) }
        }
        var failure: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &failure, &size) == 0 else {
            throw .connect(errno: errno)
        }
        if failure != 0 { throw .connect(errno: failure) }
    }

    deinit {
        close(fd)
        remote?.finish()
    }

    private static func setTimeout(_ fd: Int32, seconds: Double) {
        let whole = max(0, seconds.rounded(.down))
        var value = timeval(tv_sec: Int(whole), tv_usec: Int((seconds - whole) * 1_000_000))
        let size = socklen_t(MemoryLayout<timeval>.size)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &value, size)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &value, size)
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(TransportError) {
        guard var base = bytes.baseAddress else { return }
        var remaining = bytes.count
        while remaining > 0 {
            let sent = retryingInterrupts { send(fd, base, remaining, Int32(MSG_NOSIGNAL)) }
            if sent < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK { throw .timedOut }
                throw .write(errno: errno)
            }
            remaining -= sent
            base += sent
        }
    }

    func write(_ bytes: [UInt8]) throws(TransportError) {
        // withUnsafeBytes does not rethrow typed errors; carry the failure out by hand.
        let failure: TransportError? = bytes.withUnsafeBytes { raw in
            do throws(TransportError) {
                try write(raw)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    /// Reads what is there (at most `buffer.count` bytes); 0 at the end of the stream.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(TransportError) -> Int {
        let count = retryingInterrupts { recv(fd, buffer.baseAddress, buffer.count, 0) }
        if count > 0 { receivedAnything = true }
        if count >= 0 { return count }
        if errno == EAGAIN || errno == EWOULDBLOCK { throw .timedOut }
        throw .read(errno: errno)
    }
}
