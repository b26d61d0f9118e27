import CLinux
import Glibc

/// Resource limits, capabilities and ids of the app process, in the order of the launch path:
/// rlimits → capability bounding set → groups, gid, uid (uid last, since it gives up the right to
/// change the others) → no capability left in any set.
enum Credentials {
    /// The highest capability number the kernel knows, read by the outer launcher from the host
    /// /proc (the sandbox may have no /proc). Falls back to asking PR_CAPBSET_READ.
    static func lastCapability() -> Int32 {
        let fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC)
        if fd >= 0 {
            defer { close(fd) }
            // A few digits and a newline, parsed in place (no buffer to fill, no String).
            var text: (UInt64, UInt64) = (0, 0)
            let count = withUnsafeMutableBytes(of: &text) { read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                let value = withUnsafeBytes(of: &text) { bytes -> Int32? in
                    var value: Int32 = 0
                    var digits = 0
                    for byte in bytes[0..<count] {
                        if byte == UInt8(ascii: "\n") { break }
                        guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < 4
                        else {
                            return nil
                        }
                        value = value * 10 + Int32(byte - UInt8(ascii: "0"))
                        digits += 1
                    }
                    return digits > 0 ? value : nil
                }
                if let value { return value }
            }
        }
        var cap: Int32 = 0
        while appd_capbset_read(cap + 1) >= 0 { cap += 1 }
        return cap
    }

    static func applyResourceLimits(_ limits: [ResourceLimit]) throws {
        for limit in limits {
            try sys(
                appd_setrlimit(limit.resource, limit.soft, limit.hard), "rlimit",
                "cannot set \(limit.name)")
        }
    }

    /// Empties the bounding set (so nothing the app execs can gain a capability back, even a
    /// file with capabilities) and the ambient set.
    static func dropBoundingSet(lastCapability: Int32) throws {
        for cap in 0...lastCapability {
            try sys(
                appd_capbset_drop(cap), "caps",
                "cannot drop capability \(cap) from the bounding set")
        }
        try sys(appd_cap_ambient_clear_all(), "caps", "cannot clear the ambient set")
    }

    static func switchIdentity(uid: uid_t, gid: gid_t, groups: [gid_t]) throws {
        _ = try groups.withUnsafeBufferPointer { buffer in
            try sys(setgroups(buffer.count, buffer.baseAddress), "setgroups", "\(groups)")
        }
        try sys(appd_setresgid(gid), "setresgid", "gid \(gid)")
        try sys(appd_setresuid(uid), "setresuid", "uid \(uid)")
        // Switching away from uid 0 clears the permitted and effective sets already, but not
        // the inheritable one, and not at all when the app's uid is 0.
        try sys(appd_capset_zero(), "caps", "cannot clear the capability sets")
    }
}
