import AppBundle
import AppdBase
import Glibc

/// The directory an archive is extracted into, and the rules for what may be created there.
///
/// Every entry is created relative to its parent's directory fd with calls that never follow a
/// symlink (`mkdirat`, `openat(O_CREAT|O_EXCL|O_NOFOLLOW)`, `symlinkat`), and each parent is
/// reached one component at a time with `openat(O_DIRECTORY|O_NOFOLLOW)`. The directory starts
/// empty and only this value writes to it, so the kernel is the record of what the archive
/// created: `EEXIST` is a duplicate entry, `ELOOP`/`ENOTDIR` a path through a symlink or file.
struct ExtractionTree: ~Copyable {
    let limits: BundleLimits
    let rules: ExtractionRules
    private let root: Int32
    /// The directories from the root down to the parent of the last entry (root excluded), so
    /// the entries of one directory, which tar lists together, cost no extra opens.
    private var open: [(name: [UInt8], fd: Int32)] = []
    /// Directories made because an entry needed them before (or without) their own entry; an
    /// entry for one of these later is not a duplicate. Empty for what `tar -c` writes.
    private var implicit: Set<[UInt8]> = []
    private(set) var entryCount = 0
    private(set) var totalBytes: Int64 = 0

    init(root path: String, limits: BundleLimits, rules: ExtractionRules = .bundle) throws {
        let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT {
                throw AppdError(.notFound, "\(path): no such directory to extract into")
            }
            throw AppdError.system("open \(path)")
        }
        guard let empty = Self.isEmpty(fd), empty else {
            let error = errno
            close(fd)
            if error != 0 { throw AppdError.system("read directory \(path)", errno: error) }
            // A leftover entry would be taken for a duplicate, or worse, followed.
            throw AppdError(
                .exists,
                "\(path) is not empty; a bundle archive is extracted into an empty directory")
        }
        root = fd
        self.limits = limits
        self.rules = rules
    }

    deinit {
        for entry in open { close(entry.fd) }
        close(root)
    }

    mutating func makeDirectory(_ raw: [UInt8]) throws {
        let shown = Tar.shown(raw)
        let (path, parts) = try checked(raw, isDirectory: true, shown)
        guard let name = parts.last else { return }  // GNU tar's "./": the directory itself
        let parent = try parent(of: parts, shown)
        let made = implicit.remove(Array(path.utf8)) == nil
        if made {
            try count(shown)
            guard mkdirat(parent, Self.string(name), 0o755) == 0 else {
                throw failure("mkdir", path, shown)
            }
        }
        open.append((name, try openDirectory(name, in: parent, path: path, made: made)))
    }

    /// Gives what was just created to `rules.owner` (nothing for a bundle, which stays root's).
    private func own(_ fd: Int32, _ path: String) throws {
        guard let owner = rules.owner else { return }
        guard fchown(fd, owner.uid, owner.gid) == 0 else { throw AppdError.system("chown \(path)") }
    }

    /// Creates the file and returns its fd, open for writing (the caller closes it), and its
    /// path relative to the root as the installer's walker will name it.
    mutating func makeFile(_ raw: [UInt8], mode: Int64, size: Int64) throws -> (
        fd: Int32, path: String
    ) {
        let shown = Tar.shown(raw)
        let (path, parts) = try checked(raw, isDirectory: false, shown)
        guard size <= limits.maxTotalBytes - totalBytes else {
            throw AppdError.archive(
                shown,
                "brings the contents past \(limits.maxTotalBytes) bytes (MaxTotalBytes)")
        }
        let parent = try parent(of: parts, shown)
        let permissions: mode_t = mode & 0o111 != 0 ? 0o755 : 0o644
        try count(shown)
        let fd = openat(
            parent, Self.string(parts[parts.count - 1]),
            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, permissions)
        guard fd >= 0 else { throw failure("create", path, shown) }
        totalBytes += size
        // The umask narrowed the creation mode; the installer expects exactly these bits.
        do {
            guard fchmod(fd, permissions) == 0 else { throw AppdError.system("chmod \(path)") }
            try own(fd, path)
        } catch {
            close(fd)
            throw error
        }
        return (fd, path)
    }

    /// Targets are stored as given: the installer's walker judges where they lead. Absolute
    /// targets are refused here already, since no bundle may hold one; a data container may
    /// (`rules.allowsAbsoluteLinks`: the app could make the same link itself, and appd never
    /// follows one there).
    mutating func makeSymlink(_ raw: [UInt8], target: [UInt8]) throws {
        let shown = Tar.shown(raw)
        let (path, parts) = try checked(raw, isDirectory: false, shown)
        guard !target.isEmpty else {
            throw AppdError.archive(shown, "is a symlink with an empty target")
        }
        guard !target.contains(0), let text = String(validating: target, as: UTF8.self) else {
            throw AppdError.archive(shown, "is a symlink whose target holds a NUL or is not UTF-8")
        }
        guard rules.allowsAbsoluteLinks || target.first != UInt8(ascii: "/") else {
            throw AppdError.archive(
                shown,
                "is a symlink to the absolute path \(Tar.shown(target)); links must stay inside the bundle"
            )
        }
        guard target.count < Int(PATH_MAX) else {
            throw AppdError.archive(shown, "has a symlink target over \(PATH_MAX) bytes")
        }
        let parent = try parent(of: parts, shown)
        try count(shown)
        let name = Self.string(parts[parts.count - 1])
        guard symlinkat(text, parent, name) == 0 else { throw failure("symlink", path, shown) }
        if let owner = rules.owner,
            fchownat(parent, name, owner.uid, owner.gid, AT_SYMLINK_NOFOLLOW) != 0
        {
            throw AppdError.system("chown \(path)")
        }
    }

    /// A second name for a regular file this extraction made earlier (`isExtractedFile`, by its
    /// path as `makeFile` returned it), where `rules.hardLinks` allows the pair. The file's
    /// folder is reached one component at a time without following a link, as every parent is,
    /// and `linkat` is not asked to follow one either.
    mutating func makeHardLink(
        _ raw: [UInt8], target: [UInt8], isExtractedFile: (String) -> Bool
    ) throws {
        let shown = Tar.shown(raw)
        let (path, parts) = try checked(raw, isDirectory: false, shown)
        guard let (targetPath, targetParts) = try? checked(target, isDirectory: false, shown),
            isExtractedFile(targetPath)
        else {
            throw AppdError.archive(
                shown,
                "is a hard link to '\(Tar.shown(target))', which is not a file extracted before it")
        }
        guard let allowed = rules.hardLinks, allowed(path, targetPath) else {
            throw AppdError.archive(
                shown,
                "is a hard link to '\(Tar.shown(target))', which it may not share a file with")
        }
        var folder = dup(root)
        guard folder >= 0 else { throw AppdError.system("dup") }
        defer { close(folder) }
        for name in targetParts.dropLast() {
            let next = openat(
                folder, Self.string(name), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard next >= 0 else { throw AppdError.system("open the folder of \(targetPath)") }
            close(folder)
            folder = next
        }
        let targetName = Self.string(targetParts[targetParts.count - 1])
        var info = stat()
        guard fstatat(folder, targetName, &info, AT_SYMLINK_NOFOLLOW) == 0,
            info.st_mode & S_IFMT == S_IFREG
        else {
            throw AppdError.archive(shown, "is a hard link to '\(Tar.shown(target))', not a file")
        }
        let parent = try parent(of: parts, shown)
        try count(shown)
        guard linkat(folder, targetName, parent, Self.string(parts[parts.count - 1]), 0) == 0 else {
            throw failure("link", path, shown)
        }
    }

    /// The entry's path without a leading `./` (or a directory's trailing `/`), split into
    /// components, after every check that needs only the name. The work is on bytes, as the
    /// kernel sees them: Swift compares `String`s by canonical equivalence and would take
    /// `"/\u{301}"` for one character rather than a separator and a name.
    private func checked(_ raw: [UInt8], isDirectory: Bool, _ shown: String) throws -> (
        String, [[UInt8]]
    ) {
        func refuse(_ problem: String) -> AppdError { .archive(shown, problem) }
        let slash = UInt8(ascii: "/")
        let dot = UInt8(ascii: ".")
        guard !raw.contains(0) else { throw refuse("has a NUL byte in its name") }
        guard String(validating: raw, as: UTF8.self) != nil else {
            throw refuse("has a name that is not UTF-8")
        }
        guard raw.first != slash else { throw refuse("is an absolute path") }
        var bytes = raw[...]
        if bytes.starts(with: [dot, slash]) {
            bytes = bytes.dropFirst(2)
        } else if bytes.elementsEqual([dot]) {
            bytes = []
        }
        if isDirectory && bytes.last == slash { bytes = bytes.dropLast() }
        guard !bytes.isEmpty else {
            if isDirectory { return ("", []) }
            throw refuse("names the extraction directory itself")
        }
        let parts = bytes.split(separator: slash, omittingEmptySubsequences: false).map(Array.init)
        for part in parts {
            if part.isEmpty { throw refuse("has an empty path component") }
            if part == [dot, dot] { throw refuse("has a '..' component") }
            if part == [dot] { throw refuse("has a '.' component") }
        }
        guard bytes.count <= limits.maxPathLength else {
            throw refuse(
                "has a path of \(bytes.count) bytes, over the limit of \(limits.maxPathLength) (MaxPathLength)"
            )
        }
        let levels = isDirectory ? parts.count : parts.count - 1
        guard levels <= limits.maxDepth else {
            throw refuse(
                "nests \(levels) directories deep, over the limit of \(limits.maxDepth) (MaxDepth)")
        }
        return (String(decoding: bytes, as: UTF8.self), parts)
    }

    /// Opens (making them if need be) the directories above the entry, keeping what the last
    /// entry opened where the paths agree.
    private mutating func parent(of parts: [[UInt8]], _ shown: String) throws -> Int32 {
        let parents = parts.dropLast()
        var keep = 0
        while keep < open.count, keep < parents.count, open[keep].name == parents[keep] {
            keep += 1
        }
        while open.count > keep { close(open.removeLast().fd) }
        for index in keep..<parents.count {
            let name = parents[index]
            let path = Self.string(Array(parents[...index].joined(separator: [UInt8(ascii: "/")])))
            let directory = open.last?.fd ?? root
            var info = stat()
            let made = fstatat(directory, Self.string(name), &info, AT_SYMLINK_NOFOLLOW) != 0
            if made {
                guard errno == ENOENT else { throw AppdError.system("stat \(path)") }
                try count(shown)
                guard mkdirat(directory, Self.string(name), 0o755) == 0 else {
                    throw failure("mkdir", path, shown)
                }
                implicit.insert(Array(path.utf8))
            }
            open.append(
                (name, try openDirectory(name, in: directory, path: path, made: made, for: shown)))
        }
        return open.last?.fd ?? root
    }

    private func openDirectory(
        _ name: [UInt8], in parent: Int32, path: String, made: Bool, for shown: String? = nil
    ) throws -> Int32 {
        let fd = openat(parent, Self.string(name), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            guard errno == ELOOP || errno == ENOTDIR else { throw AppdError.system("open \(path)") }
            var info = stat()
            let isLink =
                fstatat(parent, Self.string(name), &info, AT_SYMLINK_NOFOLLOW) == 0
                && info.st_mode & S_IFMT == S_IFLNK
            throw AppdError.archive(
                shown ?? path,
                "lies below \(path), which is \(isLink ? "a symlink" : "a file") in the archive; extraction never goes through one"
            )
        }
        // mkdirat's mode was narrowed by the umask.
        do {
            if made {
                guard fchmod(fd, 0o755) == 0 else { throw AppdError.system("chmod \(path)") }
                try own(fd, path)
            }
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// Every entry counts toward MaxFiles, directories made implicitly included, as the
    /// installer's walker counts them.
    private mutating func count(_ shown: String) throws {
        guard entryCount < limits.maxFiles else {
            throw AppdError.archive(
                shown, "is past the limit of \(limits.maxFiles) entries (MaxFiles)")
        }
        entryCount += 1
    }

    private func failure(
        _ step: String, _ path: String, _ shown: String, errno error: Int32 = errno
    )
        -> AppdError
    {
        error == EEXIST
            ? AppdError.archive(shown, "appears twice in the archive")
            : AppdError.system("\(step) \(path)", errno: error)
    }

    /// A checked component or path (valid UTF-8, so the bytes survive unchanged).
    private static func string(_ bytes: [UInt8]) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    /// Nil (with errno set) if the directory cannot be read.
    private static func isEmpty(_ fd: Int32) -> Bool? {
        let copy = dup(fd)
        guard copy >= 0, let dir = fdopendir(copy) else {
            if copy >= 0 { close(copy) }
            return nil
        }
        defer { closedir(dir) }
        errno = 0
        while let entry = readdir(dir) {
            let name = directoryEntryName(entry)
            if name != [46] && name != [46, 46] { return false }
        }
        return errno == 0 ? true : nil
    }
}

/// What an extraction may create beyond a bundle's files, and whose they are.
public struct ExtractionRules: Sendable {
    /// Every entry is made owned by this uid and gid (fchown on the new fd, `fchownat` with
    /// AT_SYMLINK_NOFOLLOW for a link); nil: root's, as the extracting daemon made them.
    public var owner: (uid: uid_t, gid: gid_t)?
    /// Symlinks may name absolute targets (stored, never followed).
    public var allowsAbsoluteLinks = false
    /// Sparse files of GNU tar's pax format 1.0 are taken as sparse files (a bundle's are
    /// refused: its files are hashed whole).
    public var allowsSparseFiles = false
    /// Hard links are taken where this says the link (first) and the file it names (second,
    /// a regular file extracted earlier) may share an inode; nil: every hard link is refused.
    public var hardLinks: (@Sendable (String, String) -> Bool)?

    /// A bundle: root's files, links that stay inside.
    public static let bundle = ExtractionRules()

    public init(
        owner: (uid: uid_t, gid: gid_t)? = nil, allowsAbsoluteLinks: Bool = false,
        allowsSparseFiles: Bool = false, hardLinks: (@Sendable (String, String) -> Bool)? = nil
    ) {
        self.owner = owner
        self.allowsAbsoluteLinks = allowsAbsoluteLinks
        self.allowsSparseFiles = allowsSparseFiles
        self.hardLinks = hardLinks
    }
}
