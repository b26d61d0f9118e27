import Foundation

/// A property-list dictionary in a file: read in any format, written as a binary plist,
/// atomically (a temporary file beside the target, fsync, rename, fsync of the folder), so the
/// file is always the old version or the new one, never half-written — even if the app is
/// killed mid-save or the host loses power.
enum PropertyListFile {
    /// The dictionary in `url`; nil if there is no file. A file that is not a plist dictionary
    /// throws `invalidData`.
    static func read(_ url: URL) throws -> [String: Any]? {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            if !FileManager.default.fileExists(atPath: url.path) { return nil }
            throw AppRuntimeError(.io, "\(url.path): cannot read: \(error.localizedDescription)")
        }
        var format = PropertyListSerialization.PropertyListFormat.binary
        let value = try? PropertyListSerialization.propertyList(from: data, format: &format)
        // Foundation also takes bare text as an OpenStep plist; a preferences file
        // is never written that way, so such a file is damage, not data.
        guard format != .openStep, let dictionary = value as? [String: Any] else {
            throw AppRuntimeError(.invalidData, "\(url.path) is not a property list dictionary")
        }
        return dictionary
    }

    /// Writes `dictionary` to `url` as a binary plist, mode 0600, creating the folder (0700).
    static func write(_ dictionary: [String: Any], to url: URL) throws {
        let data: Data
        do {
            data = try PropertyListSerialization.data(
                fromPropertyList: dictionary, format: .binary, options: 0)
        } catch {
            throw AppRuntimeError(
                .invalidValue,
                "\(url.lastPathComponent): cannot encode as a property list: \(error)")
        }
        let folder = url.deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(
                at: folder, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        } catch {
            throw AppRuntimeError(
                .io, "\(folder.path): cannot create: \(error.localizedDescription)")
        }
        var template = Array("\(folder.path)/.\(url.lastPathComponent).XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw AppRuntimeError.system("mkstemp in \(folder.path)") }
        let temporary = String(
            decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var renamed = false
        defer {
            if !renamed { unlink(temporary) }
        }
        do {
            defer { close(fd) }
            try writeAll(data, to: fd, path: temporary)
            guard fchmod(fd, 0o600) == 0 else {
                throw AppRuntimeError.system("fchmod \(temporary)")
            }
            guard fsync(fd) == 0 else { throw AppRuntimeError.system("fsync \(temporary)") }
        }
        guard rename(temporary, url.path) == 0 else {
            throw AppRuntimeError.system("rename \(temporary) -> \(url.path)")
        }
        renamed = true
        // The rename is durable only once the folder's entry is on disk.
        let folderFD = open(folder.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if folderFD >= 0 {
            _ = fsync(folderFD)
            close(folderFD)
        }
    }

    private static func writeAll(_ data: Data, to fd: Int32, path: String) throws {
        try data.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            var offset = 0
            while offset < buffer.count {
                let n = Glibc.write(fd, base + offset, buffer.count - offset)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { throw AppRuntimeError.system("write \(path)") }
                offset += n
            }
        }
    }
}
