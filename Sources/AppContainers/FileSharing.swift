import AppdBase
import CLinux
import Foundation
import Glibc
import Sandbox

/// File sharing (iOS's iTunes file sharing): an app whose Info.plist has `UIFileSharingEnabled`
/// = YES lets the computer list, read, write and delete what is in its `Documents`
/// (`appctl files`). The folder is the app's and it may be running: every path is opened
/// beneath the Documents fd with openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
/// RESOLVE_NO_XDEV, so no link the app planted, and no folder it swaps for a link while the
/// daemon works, takes the daemon anywhere else, and no mount is crossed. A file put is
/// written under a temporary name beside its place, owned by the app, and renamed over it
/// when it is whole; the daemon's writes are charged to the app's data quota as the app's
/// own are (clinux_files.h).
public enum FileSharing {
    public static let infoKey = "UIFileSharingEnabled"
    /// A listing answers at most this many entries (and stops at `listSeconds`): `complete`
    /// false says there is more.
    public static let maxListEntries = 10_000
    public static let listSeconds = 2.0
    /// The prefix of the temporary name a put writes under.
    public static let uploadPrefix = ".appd-upload-"
    /// O_PATH (behind _GNU_SOURCE, so not in Swift's Glibc): with O_NOFOLLOW it opens a link
    /// itself.
    static let pathOnly: Int32 = 0o10_000_000
}

/// A path relative to Documents as a client gave it: components without `.` or `..`, never
/// absolute, each at most NAME_MAX bytes, the whole at most 1,024 bytes.
public struct SharedPath: Sendable, Equatable, CustomStringConvertible {
    public let components: [String]

    public init(_ text: String) throws {
        func refuse(_ why: String) -> AppdError {
            AppdError(
                .badRequest, "path '\(text.prefix(200))' \(why)",
                hint: "file sharing paths are relative to the app's Documents, like notes/a.txt")
        }
        guard !text.isEmpty else { throw refuse("is empty") }
        guard text.utf8.count <= 1024 else { throw refuse("is longer than 1024 bytes") }
        guard !text.utf8.contains(0) else { throw refuse("contains a NUL byte") }
        guard !text.hasPrefix("/") else { throw refuse("is absolute") }
        let parts = text.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard !parts.isEmpty else { throw refuse("names no file") }
        for part in parts {
            guard part != "..", part != "." else { throw refuse("has a '\(part)' component") }
            guard part.utf8.count <= 255 else { throw refuse("has a component over 255 bytes") }
        }
        components = parts
    }

    /// The folder holding it, relative to Documents (`.` for Documents itself).
    public var parent: String {
        components.count == 1 ? "." : components.dropLast().joined(separator: "/")
    }
    public var name: String { components[components.count - 1] }
    public var description: String { "Documents/" + components.joined(separator: "/") }
}

/// One entry of a listing, by its path relative to Documents.
public struct SharedFile: Sendable, Equatable {
    public enum Kind: String, Sendable { case file, directory, link, other }
    public var path: String
    public var kind: Kind
    /// Bytes (st_size) for a file; 0 otherwise.
    public var size: Int64
    public var modified: Date
}

/// An app's Documents, open for file sharing; every operation is relative to its fd.
public final class SharedDocuments: @unchecked Sendable {
    let documents: FileDescriptor
    public let app: InstalledApp

    /// Refused, naming the key, unless the app opted in; refused if Documents is not a folder
    /// reached without a link.
    public init(app: InstalledApp, root: StateRoot) throws {
        guard app.fileSharingEnabled(in: root) else {
            throw AppdError(
                .permissionDenied,
                "\(app.bundleID) does not share its files: its Info.plist has no \(FileSharing.infoKey) = YES",
                hint: "only apps that set \(FileSharing.infoKey) in Info.plist take appctl files")
        }
        self.app = app
        do {
            documents = try FileDescriptor.directory(root.dataContainersPath)
                .openDirectory(app.dataUUID).openDirectory("Documents")
        } catch let error as AppdError where [ENOENT, ENOTDIR, ELOOP].contains(error.errno ?? 0) {
            throw AppdError(
                .notFound, "\(app.bundleID) has no Documents folder (or it is not a folder)",
                hint: "'appd doctor --repair' makes it again")
        }
        guard appd_is_mount_root(documents.raw) != 1 else {
            throw AppdError(
                .unsupported, "\(app.bundleID)'s Documents is a mount point: appd does not share it"
            )
        }
    }

    // MARK: List

    /// Everything beneath Documents (links listed, never followed), at most
    /// `FileSharing.maxListEntries`; false when the walk stopped at a bound.
    public func list() -> (files: [SharedFile], complete: Bool) {
        var walk = StorageWalk(
            limits: StorageWalkLimits(
                maxEntries: FileSharing.maxListEntries, maxSeconds: FileSharing.listSeconds))
        var files: [SharedFile] = []
        _ = walk.measure(top: documents.raw, start: ".") { path, st in
            let kind: SharedFile.Kind =
                switch st.st_mode & S_IFMT {
                case S_IFREG: .file
                case S_IFDIR: .directory
                case S_IFLNK: .link
                default: .other
                }
            files.append(
                SharedFile(
                    path: String(path.dropFirst(2)), kind: kind,
                    size: kind == .file ? Int64(st.st_size) : 0,
                    modified: Date(
                        timeIntervalSince1970: Double(st.st_mtim.tv_sec) + Double(
                            st.st_mtim.tv_nsec) / 1e9)))
        }
        return (files.sorted { $0.path < $1.path }, walk.complete)
    }

    // MARK: Get

    /// The file at `path`, open for reading, and its size now (a reader sends at most that
    /// much: a file the app keeps growing does not make an endless answer).
    public func openForReading(_ path: SharedPath) throws -> (fd: FileDescriptor, size: Int64) {
        // O_NONBLOCK: a FIFO the app made must not hold the daemon in open(2).
        let fd = appd_open_beneath(
            documents.raw, path.components.joined(separator: "/"),
            O_RDONLY | O_NONBLOCK, 0)
        guard fd >= 0 else { throw Self.failure("read", path, errno: errno) }
        let file = FileDescriptor(raw: fd, path: path.description)
        let st = try file.status()
        guard st.st_mode & S_IFMT == S_IFREG else {
            throw AppdError(
                .badRequest,
                "\(path) is \(st.st_mode & S_IFMT == S_IFDIR ? "a folder" : "not a regular file"): appctl files get takes a file"
            )
        }
        return (file, Int64(st.st_size))
    }

    // MARK: Put

    /// Starts writing `path`: a new file beside it under a temporary name, the app's own,
    /// mode 0600. `commit` renames it into place; until then (and if the upload fails) the
    /// old file, if any, is untouched.
    public func beginPut(_ path: SharedPath) throws -> SharedUpload {
        let parent = try openParent(path, for: "write")
        var st = Glibc.stat()
        if fstatat(parent.raw, path.name, &st, AT_SYMLINK_NOFOLLOW) == 0 {
            switch st.st_mode & S_IFMT {
            case S_IFREG: break
            case S_IFLNK: throw Self.throughLink("write", path)
            default:
                throw AppdError(.conflict, "\(path) exists and is not a file; nothing was written")
            }
        }
        let temporary = FileSharing.uploadPrefix + UUID().uuidString.prefix(12)
        let fd = openat(
            parent.raw, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Self.failure("write", path, errno: errno) }
        let upload = SharedUpload(
            parent: parent, temporary: temporary, file: FileDescriptor(raw: fd, path: temporary),
            path: path, uid: app.uid, gid: app.gid)
        guard fchown(fd, app.uid, app.gid) == 0 else {
            let error = AppdError.system("chown \(path)")
            upload.abandon()
            throw error
        }
        return upload
    }

    // MARK: Remove

    /// Removes the file, link or folder (with what it holds) at `path`; returns the kind that
    /// was removed. A link is removed itself, never what it names.
    public func remove(_ path: SharedPath) throws -> SharedFile.Kind {
        let parent = try openParent(path, for: "remove")
        var st = Glibc.stat()
        guard fstatat(parent.raw, path.name, &st, AT_SYMLINK_NOFOLLOW) == 0 else {
            throw Self.failure("remove", path, errno: errno)
        }
        switch st.st_mode & S_IFMT {
        case S_IFDIR:
            try parent.removeTree(path.name)
            return .directory
        default:
            guard unlinkat(parent.raw, path.name, 0) == 0 else {
                throw Self.failure("remove", path, errno: errno)
            }
            return st.st_mode & S_IFMT == S_IFLNK
                ? .link
                : st.st_mode & S_IFMT == S_IFREG
                    ? .file : .other
        }
    }

    // MARK: Plumbing

    /// The folder holding `path`, reached beneath Documents without a link or a mount.
    private func openParent(_ path: SharedPath, for verb: String) throws -> FileDescriptor {
        let fd = appd_open_directory_beneath(documents.raw, path.parent)
        guard fd >= 0 else {
            var code = errno
            // O_DIRECTORY meeting a link as the last component says ENOTDIR: say it was a link.
            if code == ENOTDIR, isLink(path.parent) { code = ELOOP }
            throw Self.failure(verb, path, folder: "Documents/\(path.parent)", errno: code)
        }
        return FileDescriptor(raw: fd, path: "Documents/\(path.parent)")
    }

    /// Whether `relative` (beneath Documents, reached without a link) is itself a link.
    private func isLink(_ relative: String) -> Bool {
        let fd = appd_open_beneath(documents.raw, relative, FileSharing.pathOnly, 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var st = Glibc.stat()
        return fstat(fd, &st) == 0 && st.st_mode & S_IFMT == S_IFLNK
    }

    static func throughLink(_ verb: String, _ path: SharedPath) -> AppdError {
        AppdError(
            .permissionDenied,
            "cannot \(verb) \(path): it is a symbolic link, and file sharing never follows one",
            errno: ELOOP)
    }

    /// The error of a failed open beneath Documents, `errno` naming why.
    static func failure(
        _ verb: String, _ path: SharedPath, folder: String? = nil, errno code: Int32
    ) -> AppdError {
        let what = folder.map { "\(path) (in \($0))" } ?? "\(path)"
        switch code {
        case ENOENT:
            return AppdError(.notFound, "cannot \(verb) \(what): no such file", errno: code)
        case ELOOP:
            return AppdError(
                .permissionDenied,
                "cannot \(verb) \(what): a component is a symbolic link, and file sharing never follows one",
                errno: code)
        case EXDEV:
            return AppdError(
                .permissionDenied,
                "cannot \(verb) \(what): it crosses a mount or leaves Documents", errno: code)
        case ENOTDIR:
            return AppdError(
                .notFound, "cannot \(verb) \(what): a component is not a folder", errno: code)
        default: return AppdError.system("\(verb) \(what)", errno: code)
        }
    }
}

/// A put under way: the temporary file and the folder it goes into. Abandoned (the temporary
/// file removed) unless committed, also when the value goes away.
public final class SharedUpload: @unchecked Sendable {
    let parent: FileDescriptor
    let temporary: String
    let file: FileDescriptor
    public let path: SharedPath
    let uid: uid_t
    let gid: gid_t
    public private(set) var written: Int64 = 0
    private var finished = false

    init(
        parent: FileDescriptor, temporary: String, file: FileDescriptor, path: SharedPath,
        uid: uid_t, gid: gid_t
    ) {
        self.uid = uid
        self.gid = gid
        self.parent = parent
        self.temporary = temporary
        self.file = file
        self.path = path
    }

    deinit { abandon() }

    /// Appends `bytes`. A full quota or filesystem removes the partial file and says which.
    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard let base = bytes.baseAddress else { return }
        var offset = 0
        while offset < bytes.count {
            let result = valueOrErrno {
                appd_write_as(file.raw, base + offset, bytes.count - offset, uid, gid)
            }
            switch result {
            case .success(let n):
                offset += n
                written += Int64(n)
            case .failure(let error): throw failed(error.rawValue)
            }
        }
    }

    /// Makes the file durable and renames it over `path`.
    public func commit() throws {
        guard fsync(file.raw) == 0 else { throw failed(errno) }
        guard renameat(parent.raw, temporary, parent.raw, path.name) == 0 else {
            let code = errno
            abandon()
            throw code == EISDIR
                ? AppdError(.conflict, "\(path) is a folder now; nothing was written", errno: code)
                : AppdError.system("rename into \(path)", errno: code)
        }
        finished = true
    }

    /// Removes the temporary file (nothing half-written stays), and gives its blocks back now:
    /// truncated first, since an unlinked file keeps them until this value's fd is closed,
    /// which may be after the client has its answer.
    public func abandon() {
        guard !finished else { return }
        finished = true
        _ = ftruncate(file.raw, 0)
        _ = unlinkat(parent.raw, temporary, 0)
    }

    private func failed(_ code: Int32) -> AppdError {
        abandon()
        switch code {
        case EDQUOT:
            return AppdError(
                .tooLarge,
                "\(path) does not fit in the app's data quota ([Sandbox] DataQuota): stopped after \(written) bytes; nothing was written",
                errno: code, hint: "free space in the app's data container, or raise its quota")
        case ENOSPC:
            return AppdError(
                .tooLarge,
                "\(path) does not fit: the state root's filesystem is full (stopped after \(written) bytes); nothing was written",
                errno: code, hint: "free space on the state root's filesystem")
        default: return AppdError.system("write \(path)", errno: code)
        }
    }
}
