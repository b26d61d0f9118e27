import Foundation
import LifecycleProtocol

/// The app's end of the lifecycle channel: a `SOCK_SEQPACKET` socket, one message per datagram.
///
/// Sends happen on the main actor (from `Application`); receiving runs on a reader thread of its
/// own, so a blocked `recv` never stalls the app's main loop. Only the main actor closes the fd,
/// and only after the reader has stopped, so no thread ever reads or writes a reused fd number.
final class LifecycleChannel: Sendable {
    let fd: Int32

    /// What the reader thread hands to the main actor.
    enum Event: Sendable, Equatable {
        case message(DaemonMessage)
        /// A datagram that is not a valid message: logged and ignored.
        case malformed(String)
        /// End of the channel (appd closed it, or `shutdown()`); the reader has stopped.
        case closed(String?)
    }

    init(fd: Int32) {
        self.fd = fd
    }

    /// The channel appd named in `APPD_LIFECYCLE_FD`, or nil when the variable is unset (run
    /// outside appd). The fd becomes close-on-exec and the variable is removed, so a child
    /// process the app starts neither inherits the channel nor mistakes another fd for it.
    static func fromEnvironment(_ environment: [String: String]) throws -> LifecycleChannel? {
        let variable = LifecycleWire.environmentVariable
        guard let text = environment[variable] else { return nil }
        unsetenv(variable)
        guard let fd = Int32(text), fd >= 0 else {
            throw AppRuntimeError(
                .invalidEnvironment,
                "\(variable) is '\(text)', not a file descriptor number")
        }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw AppRuntimeError.system("\(variable)=\(fd): fstat")
        }
        var type: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard (info.st_mode & S_IFMT) == S_IFSOCK,
            getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0,
            type == Int32(SOCK_SEQPACKET.rawValue)
        else {
            throw AppRuntimeError(
                .invalidEnvironment,
                "\(variable)=\(fd) is not a SOCK_SEQPACKET socket")
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return LifecycleChannel(fd: fd)
    }

    /// Sends one message as one datagram. MSG_NOSIGNAL: a daemon that went away must not kill
    /// the app with SIGPIPE.
    func send(_ message: AppMessage) throws {
        let data = message.encoded()
        let sent = data.withUnsafeBytes { buffer in
            Glibc.send(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL))
        }
        guard sent == data.count else {
            throw AppRuntimeError.system("lifecycle channel: send")
        }
    }

    /// Starts the reader thread; `deliver` runs on that thread for every datagram and once with
    /// `.closed` at the end.
    func startReader(deliver: @escaping @Sendable (Event) -> Void) {
        let fd = self.fd
        let thread = Thread {
            var buffer = [UInt8](repeating: 0, count: LifecycleWire.maxMessageBytes + 1)
            while true {
                // MSG_TRUNC makes recv return the datagram's real length, so an oversized one is
                // recognised instead of being parsed cut short.
                let n = buffer.withUnsafeMutableBytes {
                    recv(fd, $0.baseAddress, $0.count, Int32(MSG_TRUNC))
                }
                if n < 0 && errno == EINTR { continue }
                if n < 0 {
                    deliver(.closed("recv: \(String(cString: strerror(errno)))"))
                    return
                }
                if n == 0 {
                    deliver(.closed(nil))
                    return
                }
                guard n <= LifecycleWire.maxMessageBytes else {
                    deliver(
                        .malformed(
                            "message of \(n) bytes is over the limit of \(LifecycleWire.maxMessageBytes)"
                        ))
                    continue
                }
                do {
                    deliver(.message(try DaemonMessage.decode(Data(buffer[..<n]))))
                } catch {
                    deliver(.malformed("\(error)"))
                }
            }
        }
        thread.name = "AppRuntime lifecycle channel"
        thread.start()
    }

    /// Ends both directions; the reader then sees the end and reports `.closed`.
    func shutdown() {
        _ = Glibc.shutdown(fd, Int32(SHUT_RDWR))
    }

    /// Only after the reader reported `.closed`.
    func close() {
        _ = Glibc.close(fd)
    }
}
