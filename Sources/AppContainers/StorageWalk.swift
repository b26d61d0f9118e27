import AppdBase
import CLinux
import Foundation
import Glibc

/// What an app takes on disk, as iOS's storage screen shows it: the app (its bundle container),
/// Documents & Data (the data container but Caches and tmp), Caches and tmp.
///
/// Bytes are allocated blocks (`st_blocks` × 512), what the filesystem and the app's data
/// quota count: a sparse file counts what it holds, and a file with several hard links in the
/// container counts once. Symlinks are never followed (a link to a huge host file counts as the
/// link), no mount inside a container is entered, and the walk is iterative: each directory is
/// opened by its path beneath the container through openat2 (the kernel refuses any symlink and
/// mount crossing on the way), so at most two fds are open at any depth. It is bounded by
/// entries and by time; when it stops early each figure is a lower bound (`complete` false).
public struct StorageUsage: Sendable, Equatable {
    public var appBytes: Int64 = 0
    public var documentsAndDataBytes: Int64 = 0
    public var cachesBytes: Int64 = 0
    public var tmpBytes: Int64 = 0
    /// Files, folders and links counted in all four.
    public var entries = 0
    /// false: the walk stopped at one of its bounds, or found a part it could not read (a
    /// path beyond PATH_MAX): every figure is "at least".
    public var complete = true

    public init() {}
}

/// The bounds of one measurement: the answer to `GET /v1/apps/{id}` waits for it.
public struct StorageWalkLimits: Sendable {
    public var maxEntries: Int
    public var maxSeconds: Double

    /// One million entries or one second, whichever comes first.
    public static let standard = StorageWalkLimits(maxEntries: 1_000_000, maxSeconds: 1)

    public init(maxEntries: Int, maxSeconds: Double) {
        self.maxEntries = maxEntries
        self.maxSeconds = maxSeconds
    }
}

extension AppStore {
    /// The app's storage, measured now (see `StorageUsage`).
    public func storageUsage(of app: InstalledApp, limits: StorageWalkLimits = .standard)
        -> StorageUsage
    {
        var walk = StorageWalk(limits: limits)
        var usage = StorageUsage()
        if let bundle = app.bundleContainer(in: root) {
            usage.appBytes = walk.measure(bundle, start: ".")
        }
        let data = app.dataContainer(in: root)
        usage.documentsAndDataBytes = walk.measure(
            data, start: ".", excluding: ["./Library/Caches", "./tmp"])
        usage.cachesBytes = walk.measure(data, start: "Library/Caches")
        usage.tmpBytes = walk.measure(data, start: "tmp")
        usage.entries = walk.entries
        usage.complete = walk.complete
        return usage
    }
}

/// One measurement, across the trees it walks (so the bounds are for the whole answer).
struct StorageWalk {
    let limits: StorageWalkLimits
    let deadline: ContinuousClock.Instant
    var entries = 0
    var complete = true
    /// Files with more than one link already counted (device, inode): at most `maxEntries`.
    var linked: Set<[UInt64]> = []
    /// The bytes of the paths still to walk, at most `maxPendingBytes`: a folder of a million
    /// folders deep down must not make the list of paths take gigabytes.
    var pendingBytes = 0
    static let maxPendingBytes = 64 << 20

    init(limits: StorageWalkLimits) {
        self.limits = limits
        deadline = .now + .seconds(limits.maxSeconds)
    }

    /// Bytes allocated below `start` (a path relative to the container at `container`, the
    /// container's own folder for `.`), not counting the directories named in `excluding`
    /// (paths as the walk spells them: `./tmp`). Nothing is counted for a start that is not a
    /// directory reached without a link.
    mutating func measure(_ container: String, start: String, excluding: Set<String> = [])
        -> Int64
    {
        let top = open(container, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard top >= 0 else {
            if errno != ENOENT { complete = false }
            return 0
        }
        defer { close(top) }
        return measure(top: top, start: start, excluding: excluding)
    }

    /// The same beneath the open directory `top`; `visit` sees each entry counted, by its path
    /// as the walk spells it (`./a/b`) and its lstat (the listing file sharing answers).
    mutating func measure(
        top: Int32, start: String, excluding: Set<String> = [],
        visit: ((String, Glibc.stat) -> Void)? = nil
    ) -> Int64 {
        var total: Int64 = 0
        var pending = [start]
        pendingBytes = start.utf8.count
        while let path = pending.popLast() {
            pendingBytes -= path.utf8.count
            guard stillWithinBounds() else { return total }
            let fd = appd_open_directory_beneath(top, path)
            guard fd >= 0 else {
                switch errno {
                // Gone since it was listed, or replaced by a link or a file: nothing to count.
                case ENOENT, ENOTDIR, ELOOP: continue
                // A mount inside the container: not the app's bytes.
                case EXDEV: continue
                default:
                    complete = false
                    continue
                }
            }
            guard let dir = fdopendir(fd) else {
                close(fd)
                complete = false
                continue
            }
            defer { closedir(dir) }
            while let entry = readdir(dir) {
                let name = directoryEntryString(entry)
                if name == "." || name == ".." { continue }
                guard stillWithinBounds() else { return total }
                entries += 1
                var st = Glibc.stat()
                guard fstatat(dirfd(dir), name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
                let child = "\(path)/\(name)"
                visit?(child, st)
                if st.st_mode & S_IFMT == S_IFDIR {
                    if excluding.contains(child) { continue }
                    let size = child.utf8.count
                    if size < PATH_MAX && pendingBytes + size <= Self.maxPendingBytes {
                        pending.append(child)
                        pendingBytes += size
                    } else {
                        // Too deep for openat2's path, or too many folders waiting: counted,
                        // not walked.
                        complete = false
                    }
                } else if st.st_nlink > 1 {
                    let key = [
                        UInt64(truncatingIfNeeded: st.st_dev),
                        UInt64(truncatingIfNeeded: st.st_ino),
                    ]
                    guard linked.insert(key).inserted else { continue }
                }
                total = Self.adding(total, blocks: st.st_blocks)
            }
        }
        return total
    }

    private mutating func stillWithinBounds() -> Bool {
        guard entries < limits.maxEntries, ContinuousClock.now < deadline else {
            complete = false
            return false
        }
        return true
    }

    /// `total` plus `blocks` × 512, saturating rather than trapping.
    static func adding(_ total: Int64, blocks: Int) -> Int64 {
        guard blocks > 0 else { return total }
        let (bytes, over) = Int64(blocks).multipliedReportingOverflow(by: 512)
        guard !over else { return .max }
        let (sum, overflow) = total.addingReportingOverflow(bytes)
        return overflow ? .max : sum
    }
}
