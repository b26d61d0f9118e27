import AppdBase
import Foundation
import Glibc

/// The uid each bundle id runs as on this node (docs/oci-runtime.md, "Who the app runs as"):
/// the first time a node runs a bundle id, appd-oci gives it the lowest free uid of
/// `range` and writes `bundle-id uid` into `DATA/uids` under a lock; every container of that
/// bundle id on the node then runs as that uid, and no other app ever gets it. The range sits
/// right above appd's own `[Users] UIDRange` and `GroupRange` defaults, so an app installed by
/// the daemon and an app run by an engine never share a uid. The gid is the uid.
struct NodeUIDs {
    static let range: ClosedRange<UInt32> = 2_000_200_000...2_000_299_999
    /// `/var/lib/appd-oci`, or `APPD_OCI_DATA` (tests give each run its own).
    static var defaultDirectory: String {
        ProcessInfo.processInfo.environment["APPD_OCI_DATA"].flatMap { $0.isEmpty ? nil : $0 }
            ?? "/var/lib/appd-oci"
    }

    var directory: String

    /// The uid of `bundleID` (compared case-insensitively, as bundle ids are).
    func uid(for bundleID: String) throws -> UInt32 {
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw AppdError.system("cannot create \(directory)")
        }
        let path = "\(directory)/uids"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw AppdError.system("cannot open \(path)") }
        defer { close(fd) }
        _ = retryingInterrupts { flock(fd, LOCK_EX) }
        guard case .success(let bytes) = readAll(fd, limit: 16 << 20) else {
            throw AppdError.system("cannot read \(path)")
        }
        // The file's key: the id as AppID folds it (ASCII only, as the registry compares ids).
        let key = AppID(bundleID).key
        var taken = Set<UInt32>()
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count == 2, let uid = UInt32(fields[1]) else { continue }
            if fields[0] == key { return uid }
            taken.insert(uid)
        }
        guard let free = Self.range.first(where: { !taken.contains($0) }) else {
            throw AppdError(
                .unavailable,
                "no free uid left in \(Self.range.lowerBound)-\(Self.range.upperBound) for \(bundleID)",
                hint: "remove bundle ids no longer run on this node from \(path)")
        }
        let line = Array("\(key) \(free)\n".utf8)
        lseek(fd, 0, SEEK_END)
        guard (try? line.withUnsafeBytes({ writeAll(fd, $0) }).get()) != nil, fsync(fd) == 0 else {
            throw AppdError.system("cannot write \(path)")
        }
        return free
    }
}
