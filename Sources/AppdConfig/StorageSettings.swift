import Glibc

/// `[Storage]`: what appd does about the state root's filesystem running short of space.
public struct StorageSettings: Sendable, Equatable {
    /// A free-space level on the state root's filesystem: a share of its size, or bytes.
    public enum Level: Sendable, Equatable, CustomStringConvertible {
        case percent(Int)
        case bytes(Int64)

        /// `10%` (1-99) or a size (`2G`, `512M`, `4096`).
        public init?(_ text: String) {
            if text.hasSuffix("%") {
                guard let n = Int(text.dropLast()), (1...99).contains(n) else { return nil }
                self = .percent(n)
            } else {
                guard let n = ConfigText.size(text), n > 0 else { return nil }
                self = .bytes(n)
            }
        }

        public var description: String {
            switch self {
            case .percent(let n): "\(n)%"
            case .bytes(let n): "\(n)"
            }
        }

        /// Whether `space` is below this level.
        public func isAbove(_ space: FreeSpace) -> Bool {
            switch self {
            case .percent(let n):
                // available / total >= n / 100, without division or overflow.
                return space.availableBytes.multipliedFullWidth(by: 100)
                    >= space.totalBytes.multipliedFullWidth(by: Int64(n))
            case .bytes(let n): return space.availableBytes >= n
            }
        }
    }

    /// `ReclaimCachesBelow=`: below this level appd empties `Library/Caches` of apps with no
    /// running instance, least recently launched first, until the filesystem is above it. nil:
    /// never on its own (`appd reclaim-caches` still does it by hand).
    public var reclaimCachesBelow: Level?
    /// `BackupMaxBytes=`: the most bytes a backup's stream may hold (AppStore.backupCap); nil:
    /// what the app's quota allows, or the state root's filesystem size.
    public var backupMaxBytes: Int64?

    public init() {}
}

/// The free space of a filesystem as an unprivileged writer sees it (statvfs `f_bavail`: without
/// the blocks reserved for root).
public struct FreeSpace: Sendable, Equatable {
    public var availableBytes: Int64
    public var totalBytes: Int64

    public init(availableBytes: Int64, totalBytes: Int64) {
        self.availableBytes = availableBytes
        self.totalBytes = totalBytes
    }

    /// One statvfs(2): cheap enough to ask after every install and launch.
    public static func of(_ path: String) -> FreeSpace? {
        var st = statvfs()
        guard statvfs(path, &st) == 0 else { return nil }
        let unit = Int64(clamping: st.f_frsize)
        return FreeSpace(
            availableBytes: Int64(clamping: st.f_bavail).multipliedReportingOverflow(by: unit)
                .partialValue,
            totalBytes: Int64(clamping: st.f_blocks).multipliedReportingOverflow(by: unit)
                .partialValue)
    }
}
