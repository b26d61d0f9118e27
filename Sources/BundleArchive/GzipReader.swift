import AppdBase
import CGunzip
import Glibc

/// A gzip stream (RFC 1952) read from an fd and inflated as it is read: `appd install` of a
/// `.tar.gz`/`.tgz`, or of a gzip'd tar on stdin, told apart by its magic bytes as the other
/// formats are. zlib reads the header and checks each member's CRC-32 and length (window bits
/// 16 + 15); members that follow one another (`cat a.gz b.gz`) are read in turn, as `gzip -d`
/// does, and zero bytes after the last one (tape padding) are ignored. Anything else after it,
/// a truncated stream or corrupt data is an error naming the archive.
///
/// Bounds: 64 KiB of compressed input and zlib's 32 KiB window; what comes out is bounded by
/// the reader's own limits (the daemon's, for the tar it makes of it). zlib itself is behind
/// the CGunzip shim (gunzip.c says why).
public final class GzipReader {
    public static let magic: [UInt8] = [0x1F, 0x8B]

    private let fd: Int32
    private let shown: String
    private let inflater: OpaquePointer
    private var input = [UInt8](repeating: 0, count: 64 << 10)
    private var start = 0
    private var end = 0
    private var atEOF = false
    /// Between two members: the last one ended and no other has begun.
    private var betweenMembers = false

    /// `head`: bytes already read from `fd` (to recognize the format), which come first.
    public init(fd: Int32, head: [UInt8], shown: String) throws {
        self.fd = fd
        self.shown = shown
        if head.count > input.count {
            input = head
        } else {
            input.replaceSubrange(0..<head.count, with: head)
        }
        end = head.count
        guard let inflater = appd_gunzip_new() else {
            throw AppdError(.io, "\(shown): cannot start inflating (out of memory)")
        }
        self.inflater = inflater
    }

    deinit { appd_gunzip_free(inflater) }

    /// Fills `buffer` with the next inflated bytes; 0 at the end of the stream.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard let output = buffer.baseAddress, buffer.count > 0 else { return 0 }
        while true {
            if start == end && !atEOF { try refill() }
            if betweenMembers {
                guard try nextMemberBegins() else { return 0 }
                betweenMembers = false
                guard appd_gunzip_reset(inflater) == Int32(APPD_GUNZIP_OK) else {
                    throw AppdError(.io, "\(shown): cannot inflate the next gzip member")
                }
            }
            if start == end && atEOF {
                throw AppdError(.invalidBundle, "\(shown): the gzip stream is truncated")
            }
            var consumed = 0
            var produced = 0
            let result = input.withUnsafeBytes { bytes in
                appd_gunzip_step(
                    inflater,
                    bytes.baseAddress.map { $0.assumingMemoryBound(to: UInt8.self) + start },
                    end - start,
                    &consumed, output.assumingMemoryBound(to: UInt8.self), buffer.count, &produced)
            }
            start += consumed
            switch result {
            case Int32(APPD_GUNZIP_OK):
                // zlib takes all the input it is given into its state: no progress with input
                // left would repeat forever.
                guard consumed > 0 || produced > 0 || start == end else {
                    throw AppdError(.invalidBundle, "\(shown): not valid gzip data (no progress)")
                }
            case Int32(APPD_GUNZIP_MEMBER_END):
                betweenMembers = true
            default:
                let reason = String(cString: appd_gunzip_message(inflater))
                throw AppdError(
                    .invalidBundle,
                    "\(shown): not valid gzip data" + (reason.isEmpty ? "" : " (\(reason))"))
            }
            if produced > 0 { return produced }
        }
    }

    /// After a member: true if another one follows; false at the end (or zero padding to it).
    private func nextMemberBegins() throws -> Bool {
        while true {
            while start < end && input[start] == 0 { start += 1 }
            if start < end {
                guard input[start] == Self.magic[0] else {
                    throw AppdError(
                        .invalidBundle, "\(shown): data that is not gzip follows the gzip stream")
                }
                return true
            }
            if atEOF { return false }
            try refill()
        }
    }

    /// Reads more compressed bytes after what is left of the buffer.
    private func refill() throws {
        if start > 0 {
            input.replaceSubrange(0..<(end - start), with: input[start..<end])
            end -= start
            start = 0
        }
        let count = input.withUnsafeMutableBytes { bytes in
            retryingInterrupts {
                Glibc.read(fd, bytes.baseAddress.map { $0 + end }, bytes.count - end)
            }
        }
        if count < 0 { throw AppdError.system("read \(shown)") }
        if count == 0 { atEOF = true }
        end += count
    }
}
