import AppdBase
import Foundation
import Glibc

/// The host ids a plain container's user namespace maps its ids 0–65535 onto
/// (docs/oci-runtime.md, "Plain containers"): 65,536 ids per container, in slots from
/// 2,100,000,000 up (1,024 slots, the last id 2,167,108,863), disjoint from appd's
/// `[Users] UIDRange` and `GroupRange` defaults and from the apps' node uids
/// (2,000,200,000–2,000,299,999). A container takes the lowest free slot by creating
/// `/run/appd-oci-userns/SLOT` with `O_EXCL` (its content: the state folder that holds it), so
/// two creates never share one; `delete` frees it. Under /run, so a reboot, which ends every
/// container, frees them all. uids and gids use the same range.
enum PlainIDRange {
    static let first: UInt32 = 2_100_000_000
    static let size: UInt32 = 65_536
    static let slots: UInt32 = 1_024

    /// `/run/appd-oci-userns`, or `APPD_OCI_USERNS` (tests).
    static var directory: String {
        ProcessInfo.processInfo.environment["APPD_OCI_USERNS"].flatMap { $0.isEmpty ? nil : $0 }
            ?? "/run/appd-oci-userns"
    }

    /// Takes the lowest free slot for the container whose state folder is `owner`; its first
    /// host id.
    static func allocate(owner: String) throws -> UInt32 {
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw AppdError.system("cannot create \(directory)")
        }
        for slot in 0..<slots {
            let path = "\(directory)/\(slot)"
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
            if fd < 0 {
                if errno == EEXIST { continue }
                throw AppdError.system("cannot create \(path)")
            }
            _ = Array("\(owner)\n".utf8).withUnsafeBytes { writeAll(fd, $0) }
            close(fd)
            return first + slot * size
        }
        throw AppdError(
            .unavailable,
            "all \(slots) user-namespace id ranges of plain containers are taken (\(directory))",
            hint: "delete stopped containers; a file there whose container is gone may be removed")
    }

    /// Frees the slot starting at `hostID` (a create that failed, `delete`).
    static func free(_ hostID: UInt32) {
        guard hostID >= first, (hostID - first) % size == 0, (hostID - first) / size < slots
        else { return }
        unlink("\(directory)/\((hostID - first) / size)")
    }
}
