import AppBundle
import AppdBase
import CLinux
import Foundation
import Glibc

/// An app's own preferences domain, `Library/Preferences/<bundle id>.plist` in its data
/// container, as `appd defaults` reads and writes it (docs/lifecycle.md, "Preferences"). The folder is the
/// app's and the app may be running, so it is treated as file sharing treats Documents:
/// `Library/Preferences` is opened beneath the data container with openat2
/// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV (no link the app planted, no mount),
/// the file is read only if it is a regular file of at most `maxBytes` (opened O_NOFOLLOW and
/// O_NONBLOCK: a link or a FIFO is refused, never followed or waited on), and parsed by the
/// bundle plist reader (binary or XML, no entities, no key twice). A write goes to a temporary
/// file beside it owned by the app, written with the app's ids (charged to its data quota as
/// its own writes are), fsynced and renamed over the file, then the folder fsynced: the file is
/// always the old domain or the new one, as AppRuntime's own saves are.
public final class AppPreferences: @unchecked Sendable {
    /// The largest preferences file read or written (NSUserDefaults warns at 4 MB on tvOS;
    /// a domain is a few KiB).
    public static let maxBytes = 1 << 20
    public let app: InstalledApp
    let folder: FileDescriptor

    public var fileName: String { app.bundleID + ".plist" }
    var shown: String { "Library/Preferences/\(fileName)" }

    public init(app: InstalledApp, root: StateRoot) throws {
        self.app = app
        let container: FileDescriptor
        do {
            container = try FileDescriptor.directory(root.dataContainersPath)
                .openDirectory(app.dataUUID)
        } catch let error as AppdError where [ENOENT, ENOTDIR, ELOOP].contains(error.errno ?? 0) {
            throw AppdError(
                .notFound, "\(app.bundleID) has no data container",
                hint: "'appd doctor --repair' makes it again")
        }
        let fd = appd_open_directory_beneath(container.raw, "Library/Preferences")
        guard fd >= 0 else {
            let code = errno
            throw AppdError(
                code == ENOENT ? .notFound : .permissionDenied,
                "\(app.bundleID)'s Library/Preferences "
                    + (code == ENOENT
                        ? "does not exist"
                        : "cannot be opened without following a link or crossing a mount")
                    + " (\(errnoName(code)))", errno: code,
                hint: "'appd doctor --repair' makes the data container's folders again")
        }
        folder = FileDescriptor(raw: fd, path: "Library/Preferences")
    }

    /// The domain; empty when there is no file. A link, a FIFO, a file over `maxBytes` or one
    /// that is not a plist dictionary is an error naming the file, and nothing is changed.
    public func read() throws -> [String: PlistValue] {
        let fd = openat(folder.raw, fileName, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT { return [:] }
            throw AppdError(
                code == ELOOP ? .conflict : .io,
                code == ELOOP
                    ? "\(app.bundleID)'s \(shown) is a symbolic link: appd never follows one"
                    : "cannot open \(app.bundleID)'s \(shown) (\(errnoName(code)))",
                errno: code)
        }
        let file = FileDescriptor(raw: fd, path: shown)
        let st = try file.status()
        guard st.st_mode & S_IFMT == S_IFREG else {
            throw AppdError(.conflict, "\(app.bundleID)'s \(shown) is not a regular file")
        }
        guard st.st_size <= Self.maxBytes else {
            throw AppdError(
                .conflict,
                "\(app.bundleID)'s \(shown) is \(st.st_size) bytes, over the limit of \(Self.maxBytes)",
                hint: "'appd defaults \(app.bundleID) import FILE' replaces it")
        }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size) + 1)
        var count = 0
        while count < bytes.count {
            let n = bytes.withUnsafeMutableBytes {
                Glibc.read(fd, $0.baseAddress! + count, $0.count - count)
            }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw AppdError.system("read \(shown)") }
            if n == 0 { break }
            count += n
        }
        guard count <= Self.maxBytes else {
            throw AppdError(
                .conflict, "\(app.bundleID)'s \(shown) grew over \(Self.maxBytes) bytes")
        }
        do {
            return try PlistValue.dictionary(
                plist: Data(bytes[..<count]), maxBytes: Self.maxBytes,
                what: "\(app.bundleID)'s \(shown)")
        } catch let error as AppdError {
            throw AppdError(
                .conflict, error.message,
                hint: "'appd defaults \(app.bundleID) import FILE' replaces it")
        }
    }

    /// Replaces the domain with `values` (an empty one leaves an empty dictionary), atomically,
    /// as the app's uid.
    public func write(_ values: [String: PlistValue]) throws {
        let data = try PlistValue.plistData(values)
        guard data.count <= Self.maxBytes else {
            throw AppdError(
                .tooLarge,
                "the domain would be \(data.count) bytes, over the limit of \(Self.maxBytes)")
        }
        let temporary = ".\(fileName).appd-\(UUID().uuidString.prefix(12))"
        let fd = openat(
            folder.raw, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw AppdError.system("create \(shown) (\(temporary))") }
        let file = FileDescriptor(raw: fd, path: temporary)
        var renamed = false
        defer { if !renamed { _ = unlinkat(folder.raw, temporary, 0) } }
        try file.chown(uid: app.uid, gid: app.gid)
        try data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = appd_write_as(
                    fd, buffer.baseAddress! + offset, buffer.count - offset, app.uid, app.gid)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else {
                    let code = errno
                    throw code == EDQUOT || code == ENOSPC
                        ? AppdError(
                            .tooLarge,
                            "\(shown) does not fit in the app's data quota or its filesystem",
                            errno: code)
                        : AppdError.system("write \(shown)", errno: code)
                }
                offset += n
            }
        }
        try file.sync()
        guard renameat(folder.raw, temporary, folder.raw, fileName) == 0 else {
            throw AppdError.system("rename into \(shown)")
        }
        renamed = true
        try folder.sync()
    }
}
