import Glibc

// The journal's native protocol by hand, kept only for JournalOutputSink (app output), which
// the output relay of docs/app-output.md replaces: it goes with that file. appd's own entries
// go through libsystemd (JournalLogHandler.swift).
extension JournalLogHandler {
    static func encode(_ fields: [(String, String)]) -> [UInt8] {
        var datagram: [UInt8] = []
        for (name, value) in fields {
            datagram += Array(name.utf8)
            let bytes = Array(value.utf8)
            if bytes.contains(UInt8(ascii: "\n")) {
                datagram.append(UInt8(ascii: "\n"))
                withUnsafeBytes(of: UInt64(bytes.count).littleEndian) { datagram += $0 }
            } else {
                datagram.append(UInt8(ascii: "="))
            }
            datagram += bytes
            datagram.append(UInt8(ascii: "\n"))
        }
        return datagram
    }

    /// One datagram to journald's socket at `path` over `fd`: sendto's result (errno set on -1).
    static func send(_ datagram: [UInt8], fd: Int32, to path: String) -> Int {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            errno = ENAMETOOLONG
            return -1
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let length = socklen_t(
            (MemoryLayout<sockaddr_un>.offset(of: \.sun_path) ?? 2) + bytes.count + 1)
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                datagram.withUnsafeBytes {
                    sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), generic, length)
                }
            }
        }
    }
}
