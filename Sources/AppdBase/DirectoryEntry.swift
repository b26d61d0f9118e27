import Glibc

/// The name of an entry `readdir` returned, without its NUL, read in place. Not
/// `entry.pointee.d_name`: that copies the whole 256-byte field, while glibc's buffer holds
/// each entry in only `d_reclen` bytes, so the copy of an entry near the buffer's end read past
/// it (the daemon died of that SIGSEGV in `recover()` under bench-api's concurrent installs).
public func directoryEntryName(_ entry: UnsafePointer<dirent>) -> [UInt8] {
    let offset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
    let name = UnsafeRawPointer(entry).advanced(by: offset).assumingMemoryBound(to: UInt8.self)
    return Array(
        UnsafeBufferPointer(
            start: name, count: strlen(UnsafeRawPointer(name).assumingMemoryBound(to: CChar.self))))
}

/// `directoryEntryName` as a String (invalid UTF-8 repaired).
public func directoryEntryString(_ entry: UnsafePointer<dirent>) -> String {
    String(decoding: directoryEntryName(entry), as: UTF8.self)
}
