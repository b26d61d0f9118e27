import AppBundle
import AppdBase
import CLinux
import Foundation
import Glibc

/// The bounds of one backup's walk. What is past them is skipped and reported, not fatal: a
/// backup of what the app has is better than none, and the report says what is missing.
public struct BackupLimits: Sendable {
    /// Entries (files, folders, links) taken.
    public var maxEntries = 1_000_000
    /// Directory levels below the data container; a restore accepts as many.
    public var maxDepth = 256
    /// Bytes of a path relative to the container (below PATH_MAX, which openat2 takes).
    public var maxPathLength = 4000
    /// Bytes of the whole stream (`[Storage] BackupMaxBytes=`, or what the app's quota lets it
    /// hold: AppStore.backupCap); past it the backup is refused, naming `capSource`.
    public var maxBytes: Int64 = .max
    /// Where `maxBytes` comes from, for the refusal (`[Storage] BackupMaxBytes=4G`).
    public var capSource = "no cap"

    public init() {}

    /// What a restore's extractor allows, to take back what a backup can hold.
    public func extractionLimits(maxTotalBytes: Int64) -> BundleLimits {
        var limits = BundleLimits()
        limits.maxFiles = maxEntries + 8
        limits.maxDepth = maxDepth
        limits.maxPathLength = maxPathLength
        limits.maxTotalBytes = maxTotalBytes
        return limits
    }
}

/// Writes a backup (BackupFormat) of the data container at `container`, in the daemon, as root.
///
/// Everything in the container is the app's, and the app may be running (`--live`): the walk
/// never follows a link (each directory is opened by its path beneath the container through
/// openat2 with RESOLVE_NO_SYMLINKS|NO_XDEV, so a folder swapped for a link is refused by the
/// kernel, and a mount is not entered), stores links as links, skips FIFOs, sockets and devices
/// and reports them, takes a file that grows or shrinks while read as the size it had when
/// opened (the rest zeros; reported), and skips what vanishes. Memory is one buffer, the
/// listing of the files (bounded by `maxEntries`) and the paths waiting to be walked (bounded
/// like StorageWalk's); at most two directory fds are open.
///
/// The stream is bounded by what the app really uses (docs/backup.md, "Size"): a file with
/// holes is written as a sparse member (GNU tar's pax format 1.0: its data regions, found with
/// SEEK_DATA/SEEK_HOLE, after a map of them), a file with several names in one container is
/// written once and its other names as hard links to the first, and the whole stream stops at
/// `limits.maxBytes` with an error naming the cap.
public struct BackupWriter: ~Copyable {
    let limits: BackupLimits
    let output: TarOutput
    var summary: BackupSummary
    var listing: [BackupFile] = []
    var entries = 0
    var buffer: UnsafeMutableRawBufferPointer
    /// The first name taken of each file with more than one link, by device and inode: its
    /// other names are written as hard links to it. Emptied for each container walked (a link
    /// never joins two), bounded by `maxEntries`.
    var linked: [FileKey: String] = [:]
    /// Paths waiting to be walked, and their bytes (at most `maxPendingBytes`).
    var pending: [String] = []
    var pendingBytes = 0
    /// Before every name written or reported: `AppGroups/<id>/` while a group container is
    /// walked (its paths are relative to it, as the data container's are to that).
    var prefix = ""
    static let maxPendingBytes = 64 << 20
    static let readSize = 1 << 20

    /// The stream goes to `sink` in 64 KiB pieces.
    public init(
        manifest: BackupManifest, limits: BackupLimits = BackupLimits(),
        sink: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) {
        self.limits = limits
        output = TarOutput(sink: sink)
        summary = BackupSummary(bundleID: manifest.bundleID, live: manifest.live)
        summary.groups = manifest.groups
        buffer = .allocate(byteCount: Self.readSize, alignment: 16)
        self.manifest = manifest
    }

    let manifest: BackupManifest

    deinit { buffer.deallocate() }

    /// Writes the whole stream. `groups` are the group containers (`--groups`: the manifest
    /// names the same ids), each under `AppGroups/<id>/`, written first: `groupRead` is called
    /// with each id once its container is read, so the caller may thaw the apps that share
    /// only groups read by then. `beforeSummary` is called once the data and listing are out,
    /// before the summary: it returns the held time and the instances held (the caller thaws).
    public mutating func write(
        container: String, groups: [(id: String, path: String)] = [],
        groupRead: (String) -> Void = { _ in },
        beforeSummary: () -> (seconds: Double?, instances: [String])
    ) throws -> BackupSummary {
        let top = open(container, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard top >= 0 else { throw AppdError.system("open the data container \(container)") }
        defer { close(top) }
        try member(BackupFormat.manifestName, json: manifest)
        if !groups.isEmpty {
            try output.header(
                BackupFormat.groupsFolder + "/", mode: 0o755, size: 0,
                type: Tar.EntryType.directory)
        }
        for group in groups {
            let fd = open(group.path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else {
                throw AppdError.system("open the container of group \(group.id) \(group.path)")
            }
            defer { close(fd) }
            prefix = "\(BackupFormat.groupsFolder)/\(group.id)/"
            defer { prefix = "" }
            linked = [:]
            try output.header(prefix, mode: 0o755, size: 0, type: Tar.EntryType.directory)
            try walk(fd, from: "")
            groupRead(group.id)
        }
        prefix = ""
        linked = [:]
        for name in BackupFormat.included { try walk(top, from: name) }
        try member(
            BackupFormat.filesName,
            json: BackupFileList(
                files: listing, skipped: summary.skipped, skippedCount: summary.skippedCount))
        let held = beforeSummary()
        summary.heldSeconds = held.seconds
        summary.frozenInstances = held.instances
        summary.storedBytes = output.written
        try member(BackupFormat.summaryName, json: summary)
        try output.append(zeros: 2 * Tar.blockSize)
        try output.flush()
        return summary
    }

    private mutating func walk(_ top: Int32, from start: String) throws {
        pending = [start]
        pendingBytes = start.utf8.count
        while let path = pending.popLast() {
            pendingBytes -= path.utf8.count
            let fd = appd_open_directory_beneath(top, path.isEmpty ? "." : path)
            guard fd >= 0 else {
                switch errno {
                case ENOENT: continue  // gone since it was listed (or no Library at all)
                case ENOTDIR, ELOOP:
                    // Replaced since it was listed. A top folder that is not one would make the
                    // backup one that no restore takes (the container's folders are folders).
                    skip(
                        path,
                        path == start
                            ? "is not a folder (a link or a file the app put there); not taken"
                            : "changed type while read")
                case EXDEV: skip(path, "is a mount point; not entered")
                default: skip(path, "cannot be opened: \(errnoName(errno))")
                }
                continue
            }
            guard let dir = fdopendir(fd) else {
                close(fd)
                skip(path, "cannot be read: \(errnoName(errno))")
                continue
            }
            defer { closedir(dir) }
            if !path.isEmpty {
                guard try count(path) else { return }
                try output.header(
                    prefix + path + "/", mode: 0o755, size: 0, type: Tar.EntryType.directory)
                summary.directories += 1
            }
            var names: [String] = []
            while let entry = readdir(dir) {
                let raw = directoryEntryName(entry)
                if raw == [46] || raw == [46, 46] { continue }
                guard let name = String(validating: raw, as: UTF8.self) else {
                    skip(Self.joined(path, Tar.shown(raw)), "has a name that is not UTF-8")
                    continue
                }
                names.append(name)
                guard names.count <= limits.maxEntries else { break }
            }
            // Subfolders are pushed in reverse, so they come out in order.
            var folders: [String] = []
            for name in names.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
                let child = Self.joined(path, name)
                var st = Glibc.stat()
                guard fstatat(dirfd(dir), name, &st, AT_SYMLINK_NOFOLLOW) == 0 else {
                    if errno != ENOENT { skip(child, "cannot be read: \(errnoName(errno))") }
                    continue
                }
                guard prefix.utf8.count + child.utf8.count <= limits.maxPathLength else {
                    skip(child, "has a path over \(limits.maxPathLength) bytes")
                    continue
                }
                // Never taken, whatever the app made of it (a restore refuses it).
                if BackupFormat.excluded.contains(child) { continue }
                switch st.st_mode & S_IFMT {
                case S_IFDIR:
                    let depth = (prefix + child).utf8.count { $0 == UInt8(ascii: "/") } + 1
                    guard depth <= limits.maxDepth else {
                        skip(child, "is deeper than \(limits.maxDepth) levels; not taken")
                        continue
                    }
                    guard pendingBytes + child.utf8.count <= Self.maxPendingBytes else {
                        skip(child, "was not walked: too many folders waiting")
                        continue
                    }
                    folders.append(child)
                case S_IFREG:
                    guard try count(child) else { return }
                    try file(dirfd(dir), name, child)
                case S_IFLNK:
                    guard try count(child) else { return }
                    try link(dirfd(dir), name, path: child)
                case S_IFIFO: skip(child, "is a FIFO; not taken")
                case S_IFSOCK: skip(child, "is a socket; not taken")
                case S_IFCHR, S_IFBLK: skip(child, "is a device node; not taken")
                default: skip(child, "is of an unknown file type; not taken")
                }
            }
            for folder in folders.reversed() {
                pending.append(folder)
                pendingBytes += folder.utf8.count
            }
        }
    }

    /// Counts an entry; false (reported once) past `maxEntries`.
    private mutating func count(_ path: String) throws -> Bool {
        guard entries < limits.maxEntries else {
            skip(path, "and what follows were not taken: over \(limits.maxEntries) entries")
            pending = []
            return false
        }
        // A header, and a pax record for a long name or link.
        try reserve(3 * Int64(Tar.blockSize) + Int64(limits.maxPathLength), for: path)
        entries += 1
        return true
    }

    /// Refuses the backup if `bytes` more would bring the stream past `limits.maxBytes`.
    private func reserve(_ bytes: Int64, for path: String) throws {
        guard bytes <= limits.maxBytes - output.written else {
            throw AppdError(
                .tooLarge,
                "the backup of \(manifest.bundleID) is over its cap of \(limits.maxBytes) bytes (\(limits.capSource)) at '\(Tar.shown(Array((prefix + path).utf8)))': \(output.written) bytes written, \(bytes) more to write",
                hint:
                    "what the app holds is more than the cap allows: raise [Storage] BackupMaxBytes= in appd.conf, or remove data of the app first"
            )
        }
    }

    private mutating func file(_ parent: Int32, _ name: String, _ path: String) throws {
        // O_NONBLOCK: should the name be a FIFO by now, the open must not hang.
        let fd = openat(parent, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return }
            skip(
                path,
                errno == ELOOP ? "changed type while read" : "cannot be opened: \(errnoName(errno))"
            )
            return
        }
        defer { close(fd) }
        var before = Glibc.stat()
        guard fstat(fd, &before) == 0, before.st_mode & S_IFMT == S_IFREG else {
            skip(path, "changed type while read")
            return
        }
        let size = Int64(before.st_size)
        let mode: mode_t = before.st_mode & 0o111 != 0 ? 0o755 : 0o644
        let key = FileKey(before)
        if before.st_nlink > 1, let first = linked[key] {
            try output.header(
                prefix + path, mode: mode, size: 0, type: Tar.EntryType.hardLink,
                link: Array(first.utf8)[...])
            summary.hardLinks = (summary.hardLinks ?? 0) + 1
            return
        }
        // A file with holes allocates fewer blocks than its size (ext4's inline files none at
        // all): only those are asked for their data regions.
        let regions =
            Int64(before.st_blocks) * 512 < size ? Self.dataRegions(fd, size: size) : nil
        var hasher = ContentHasher()
        var short = false
        if let regions {
            let map = Self.sparseMap(regions, size: size)
            let stored = Int64(map.count) + regions.reduce(0) { $0 + $1.length }
            try reserve(stored + Int64(Tar.padding(for: stored)), for: path)
            let name = Array((prefix + path).utf8)
            try output.header(
                Self.sparseName(prefix + path), mode: mode, size: stored,
                type: Tar.EntryType.regular,
                records: Pax.record("GNU.sparse.major", Array("1".utf8))
                    + Pax.record("GNU.sparse.minor", Array("0".utf8))
                    + Pax.record("GNU.sparse.name", name)
                    + Pax.record("GNU.sparse.realsize", Array(String(size).utf8)))
            map.withUnsafeBytes { hasher.update($0) }
            try output.append(map)
            for region in regions {
                try copy(fd, from: region.offset, count: region.length, &hasher, &short)
            }
            try output.append(zeros: Tar.padding(for: stored))
            summary.sparseFiles = (summary.sparseFiles ?? 0) + 1
        } else {
            try reserve(size + Int64(Tar.padding(for: size)), for: path)
            try output.header(prefix + path, mode: mode, size: size, type: Tar.EntryType.regular)
            try copy(fd, from: 0, count: size, &hasher, &short)
            try output.append(zeros: Tar.padding(for: size))
        }
        if before.st_nlink > 1, linked.count < limits.maxEntries {
            linked[key] = prefix + path
        }
        var after = Glibc.stat()
        if short {
            skip(path, "shrank while read; taken as \(size) bytes, the rest zeros")
        } else if fstat(fd, &after) == 0,
            after.st_size != before.st_size || after.st_mtim.tv_sec != before.st_mtim.tv_sec
                || after.st_mtim.tv_nsec != before.st_mtim.tv_nsec
        {
            skip(path, "changed while read; taken as the first \(size) bytes read")
        }
        listing.append(
            BackupFile(
                path: prefix + path, size: size, sha256: ContentHasher.hex(hasher.finish()),
                sparse: regions == nil ? nil : true))
        summary.files += 1
        summary.bytes += size
    }

    /// Streams `count` bytes of `fd` from `offset`, hashed as they go; what the file no longer
    /// holds (it shrank since it was opened: the header promised these bytes) as zeros.
    private mutating func copy(
        _ fd: Int32, from offset: Int64, count: Int64, _ hasher: inout ContentHasher,
        _ short: inout Bool
    ) throws {
        var done: Int64 = 0
        while done < count {
            let wanted = Int(min(Int64(buffer.count), count - done))
            var got =
                short
                ? 0
                : retryingInterrupts { pread(fd, buffer.baseAddress, wanted, off_t(offset + done)) }
            if got <= 0 {
                short = true
                got = wanted
                buffer.baseAddress?.initializeMemory(as: UInt8.self, repeating: 0, count: got)
            }
            let piece = UnsafeRawBufferPointer(rebasing: buffer[0..<got])
            hasher.update(piece)
            try output.append(piece)
            done += Int64(got)
        }
    }

    private mutating func link(_ parent: Int32, _ name: String, path: String) throws {
        var target = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlinkat(parent, name, &target, target.count)
        guard count > 0, count < Int(PATH_MAX) else {
            if count < 0 && errno == ENOENT { return }
            skip(path, "is a link that cannot be read")
            return
        }
        guard String(validating: target[..<count], as: UTF8.self) != nil else {
            skip(path, "is a link whose target is not UTF-8")
            return
        }
        try output.header(
            prefix + path, mode: 0o777, size: 0, type: Tar.EntryType.symlink,
            link: target[..<count])
        summary.links += 1
    }

    private mutating func skip(_ path: String, _ reason: String) {
        summary.skippedCount += 1
        if summary.skipped.count < BackupFormat.maxListedSkips {
            summary.skipped.append(BackupSkip(path: prefix + path, reason: reason))
        }
    }

    private func member(_ name: String, json value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(value)
        try output.header(name, mode: 0o644, size: Int64(data.count), type: Tar.EntryType.regular)
        try output.append(Array(data))
        try output.append(zeros: Tar.padding(for: Int64(data.count)))
    }

    /// `name` in the folder `path` ("": the top).
    static func joined(_ path: String, _ name: String) -> String {
        path.isEmpty ? name : path + "/" + name
    }
}
