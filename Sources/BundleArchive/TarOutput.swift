import AppBundle
import Glibc

/// The writer's one buffer: headers and file data gather here and go to the sink a chunk at a
/// time, so memory stays at `BundleArchiveWriter.chunkSize` whatever the bundle holds.
final class TarOutput {
    private let sink: (UnsafeRawBufferPointer) throws -> Void
    private let base: UnsafeMutableRawPointer
    private let capacity = BundleArchiveWriter.chunkSize
    private var count = 0

    init(sink: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        self.sink = sink
        base = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
    }

    deinit { base.deallocate() }

    func append(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            if count == capacity { try flush() }
            let step = min(capacity - count, bytes.count - offset)
            bytes.withUnsafeBytes {
                UnsafeMutableRawBufferPointer(start: base + count, count: step)
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + step)]))
            }
            count += step
            offset += step
        }
    }

    func append(zeros total: Int) throws {
        var left = total
        while left > 0 {
            if count == capacity { try flush() }
            let step = min(capacity - count, left)
            (base + count).initializeMemory(as: UInt8.self, repeating: 0, count: step)
            count += step
            left -= step
        }
    }

    /// Reads exactly `size` bytes of `fd` into the stream; false if the file ended sooner (it
    /// shrank after its header was written, so the stream can no longer be right).
    func append(from fd: Int32, count size: Int64, path: String) throws -> Bool {
        var left = size
        while left > 0 {
            if count == capacity { try flush() }
            let got = read(fd, base + count, Int(min(Int64(capacity - count), left)))
            if got < 0 {
                if errno == EINTR { continue }
                throw AppdError.system("read \(path)")
            }
            if got == 0 { return false }
            count += got
            left -= Int64(got)
        }
        return true
    }

    func flush() throws {
        guard count > 0 else { return }
        try sink(UnsafeRawBufferPointer(start: base, count: count))
        count = 0
    }
}
