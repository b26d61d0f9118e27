import AppdBase
import Foundation

/// An app's backup (docs/backup.md): one tar stream, as the bundle archive is (ustar and pax,
/// owners 0, times 0), holding
///
/// 1. `.appd-backup/manifest.json` (first): the format, the app, its version and signer, when,
///    and whether its instances were frozen (`BackupManifest`);
/// 2. the data container's `Documents/` and `Library/` (never `Library/Caches/`, never `tmp/`),
///    paths relative to the container, directories before their contents, links as links; with
///    `--groups`, each application group container the app uses as `AppGroups/<group id>/`
///    (never its `Library/Caches/`);
/// 3. `.appd-backup/files.json`: every regular file's path, size and SHA-256 as they were
///    written into this stream, and what was skipped (`BackupFileList`);
/// 4. `.appd-backup/summary.json` (last, small): counts and how long the app was held
///    (`BackupSummary`), which the client reads from the stream's tail.
///
/// The listing comes after the data because the hashes are taken as the bytes stream by: each
/// file is read once. No host uid or gid is in it: a restore makes every entry the app's on
/// the host it restores on.
public enum BackupFormat {
    public static let version = 1
    public static let folder = ".appd-backup"
    public static let manifestName = ".appd-backup/manifest.json"
    public static let filesName = ".appd-backup/files.json"
    public static let summaryName = ".appd-backup/summary.json"
    /// What of the data container a backup holds, and what it never does.
    public static let included = ["Documents", "Library"]
    public static let excluded = ["Library/Caches"]
    /// The folder of the group containers (`--groups`), one folder per group id beneath it.
    public static let groupsFolder = "AppGroups"
    /// The listed skips in `files.json` and the summary; the rest are counted.
    public static let maxListedSkips = 100
    /// The largest `files.json` a restore reads (about 2.5 million files' lines).
    public static let maxListingBytes = 512 << 20

    /// Whether a hard link at `path` may name the file at `target` (both relative to the
    /// backup's top): both in the data container, or both in the same group's folder; never in
    /// the backup's own folder. A restore moves each group's tree to its own container.
    public static func mayShareFile(_ path: String, _ target: String) -> Bool {
        func container(_ path: String) -> Substring? {
            let parts = path.split(separator: "/", maxSplits: 2)
            guard let first = parts.first, first != folder else { return nil }
            guard first == groupsFolder else { return "" }
            return parts.count == 3 ? parts[1] : nil
        }
        guard let one = container(path), let other = container(target) else { return false }
        return one == other
    }

    /// Text from a backup in a message (the one rule, cut at 300 scalars).
    public static func shown(_ text: String) -> String { Tar.shown(Array(text.utf8)) }

    /// Reads `summary.json` from the last bytes of a backup stream (at least its last 64 KiB,
    /// block-aligned with the stream: `tail` starts at a multiple of 512 bytes from its start).
    /// Nil when it is not there: the stream was cut, or it is not a backup.
    public static func summary(fromTail tail: [UInt8]) -> BackupSummary? {
        var offset = 0
        var found: BackupSummary?
        while offset + Tar.blockSize <= tail.count {
            let block = tail[offset..<(offset + Tar.blockSize)]
            let name = block.prefix(100).prefix { $0 != 0 }
            if name.elementsEqual(summaryName.utf8),
                block[block.startIndex + 156] == Tar.EntryType.regular,
                let size = block.withUnsafeBytes({
                    TarHeader.number($0[124..<136], allowEmpty: false)
                }),
                size < 1 << 20, offset + Tar.blockSize + Int(size) <= tail.count
            {
                let start = offset + Tar.blockSize
                found = try? JSONDecoder().decode(
                    BackupSummary.self, from: Data(tail[start..<(start + Int(size))]))
            }
            offset += Tar.blockSize
        }
        return found
    }
}

/// The first member: what the backup is of.
public struct BackupManifest: Codable, Sendable, Equatable {
    public var format: Int
    public var bundleID: String
    public var version: String?
    /// The key id of the signer of the installed bundle it was taken from; nil: unsigned.
    public var signer: String?
    /// RFC 3339, UTC.
    public var createdAt: String
    /// Taken with the app's instances running (`--live`), not frozen.
    public var live: Bool
    /// The application groups whose containers it holds (`--groups`), under `AppGroups/`;
    /// nil or empty: none.
    public var groups: [String]?

    public init(
        bundleID: String, version: String?, signer: String?, createdAt: String, live: Bool,
        groups: [String]? = nil
    ) {
        format = BackupFormat.version
        self.bundleID = bundleID
        self.version = version
        self.signer = signer
        self.createdAt = createdAt
        self.live = live
        self.groups = groups
    }
}

/// One regular file as written into the stream.
public struct BackupFile: Codable, Sendable, Equatable {
    public var path: String
    public var size: Int64
    /// Lowercase hex: of the file's bytes; of a sparse one (`sparse`), of its member's data as
    /// stored (the map and the data regions), which a restore hashes as it writes them.
    public var sha256: String
    /// Written as a sparse member (its holes are not in the stream); nil: whole.
    public var sparse: Bool?

    public init(path: String, size: Int64, sha256: String, sparse: Bool? = nil) {
        self.path = path
        self.size = size
        self.sha256 = sha256
        self.sparse = sparse
    }
}

/// Something of the container a backup did not take, or took as it changed.
public struct BackupSkip: Codable, Sendable, Equatable {
    public var path: String
    public var reason: String

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }
}

/// The listing after the data.
public struct BackupFileList: Codable, Sendable {
    public var files: [BackupFile]
    public var skipped: [BackupSkip]
    public var skippedCount: Int

    public init(files: [BackupFile], skipped: [BackupSkip], skippedCount: Int) {
        self.files = files
        self.skipped = skipped
        self.skippedCount = skippedCount
    }
}

/// The last member, and what `appd backup` prints.
public struct BackupSummary: Codable, Sendable, Equatable {
    public var bundleID: String
    public var files: Int
    public var directories: Int
    public var links: Int
    /// Regular files' sizes (holes included).
    public var bytes: Int64
    /// Names written as hard links to a file already in the stream (nil: none).
    public var hardLinks: Int?
    /// Files written sparse (nil: none).
    public var sparseFiles: Int?
    /// Bytes of the stream before the summary: what the backup costs, at most the cap.
    public var storedBytes: Int64?
    /// Entries left out (FIFOs, sockets, devices, too deep, vanished), and files that changed
    /// while read (taken as read); the first `BackupFormat.maxListedSkips` named.
    public var skippedCount: Int
    public var skipped: [BackupSkip]
    /// How long the app's instances were frozen, in seconds; nil with `--live`, or when none ran.
    public var heldSeconds: Double?
    /// The instances frozen.
    public var frozenInstances: [String]
    public var live: Bool
    /// The application groups whose containers it holds (`--groups`).
    public var groups: [String]?

    public init(bundleID: String, live: Bool) {
        self.bundleID = bundleID
        self.live = live
        files = 0
        directories = 0
        links = 0
        bytes = 0
        skippedCount = 0
        skipped = []
        frozenInstances = []
    }
}

extension AppdError {
    /// A refused backup archive.
    public static func backup(_ problem: String, hint: String? = nil) -> AppdError {
        AppdError(.invalidBundle, "backup archive: \(problem)", hint: hint)
    }
}
