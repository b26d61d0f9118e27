// The launcher protocol (docs/launcher-protocol.md), spelled once for both of its sides: the
// daemon writes it (Sandbox) and the static appd-exec reads it. Standard library only, no
// Foundation and no Glibc: appd-exec links this module statically and pays for every runtime
// type lookup on every launch, so the types here are plain enums with String raw values (a
// string switch, no generic metadata) and the functions work on arrays of bytes.

/// Profile format version 1: a header line, then one record per line, `KIND FIELD...`, fields
/// separated by one space and percent-encoded (`ProfileField`).
public enum ProfileFormat {
    public static let header = "appd-profile 1"
    /// The field of `rlimit` for no limit.
    public static let unlimited = "unlimited"
    /// The kinds of `root`: `root tmpfs`, and a plain container's `root image SOURCE ro|rw`.
    public static let tmpfsRoot = "tmpfs"
    public static let imageRoot = "image"
    /// `root image SRC rw owned`: SRC's files are the container's ids already (not idmapped).
    public static let ownedRoot = "owned"
    /// The two values of `seccomp`.
    public static let seccompRequired = "required"
    public static let seccompOptional = "optional"
}

/// The names `sysctl` may hold: appd-oci checks them at create, appd-exec again.
public enum ProfileSysctl {
    /// The sysctls a container's own namespaces hold (net, ipc): `net.*`, `kernel.shm*`,
    /// `kernel.msg*`, `kernel.sem`, `fs.mqueue.*`; letters, digits, `_`, `-` and single dots.
    public static func isNamespaced(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= 256, bytes.first != UInt8(ascii: "."),
            bytes.last != UInt8(ascii: ".")
        else { return false }
        var previousDot = false
        for byte in bytes {
            let dot = byte == UInt8(ascii: ".")
            let allowed =
                dot || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
                || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            if !allowed || (dot && previousDot) { return false }
            previousDot = dot
        }
        return name.hasPrefix("net.") || name.hasPrefix("kernel.shm")
            || name.hasPrefix("kernel.msg") || name == "kernel.sem" || name.hasPrefix("fs.mqueue.")
    }
}

/// The sets of `capabilities`.
public enum ProfileCapabilitySet: String, Sendable, Codable, CaseIterable {
    case bounding, effective, permitted, inheritable, ambient
}

/// Capability names by number (linux/capability.h), as OCI configs spell them.
public enum ProfileCapability {
    public static let names = [
        "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
        "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
        "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW",
        "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT",
        "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
        "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
        "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE",
        "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",
        "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
    ]

    /// The number of a name, or nil.
    public static func number(_ name: String) -> Int? { names.firstIndex(of: name) }
}

/// The names of `unshare`.
public enum ProfileNamespace: String, Sendable, Codable, CaseIterable {
    case user, mount, pid, net, ipc, uts, cgroup
}

/// The second field of `mount`.
public enum ProfileMountKind: String, Sendable, Codable, CaseIterable {
    case roBind = "ro-bind"
    case roBindTry = "ro-bind-try"
    case rwBind = "rw-bind"
    /// `mount rw-bind-exec SRC DEST`: a plain container's writable volume, as runc mounts it
    /// (nosuid and nodev, not noexec). Plain containers only: an app never runs what it wrote.
    case rwBindExec = "rw-bind-exec"
    case devBind = "dev-bind"
    case tmpfs, proc, dev, symlink, dir, file
    /// `mount fs TYPE SOURCE DEST OPTIONS`: a kernel filesystem (proc, sysfs, tmpfs, devpts,
    /// mqueue, cgroup2) with the config's comma-separated options; always nosuid and nodev.
    /// A tmpfs on /dev gets the default device nodes and links. Plain containers only.
    case fs
    /// `mount mask DEST`: /dev/null on a file, an empty read-only tmpfs on a folder (masked
    /// paths); nothing when DEST does not exist.
    case mask
    /// `mount ro-path DEST`: DEST made read-only where it is (readonly paths).
    case roPath = "ro-path"
    /// `mount node DEST MODE TYPE:MAJOR:MINOR:UID:GID`: a device node (`c`, `b`) or fifo
    /// (`p`) made with mknod(2), owned by the host ids UID:GID, on a `nodev` mount only (a
    /// node made there can never be opened as a device: the config's `linux.devices` without
    /// a host node to bind). Plain containers only.
    case node
}

/// The access of `landlock-fs`.
public enum LandlockAccess: String, Sendable, Codable {
    /// Read files and list directories.
    case ro
    /// ro + execute.
    case rx
    /// Everything but execute: create, remove, write, truncate, device ioctls.
    case rw
    case rwx
}

/// The TCP action of `landlock-net` and `landlock-net-restrict`.
public enum LandlockPortAction: String, Sendable, Codable {
    case bind, connect
}

/// The scopes of `landlock-scope`.
public enum LandlockScopeName: String, Sendable, Codable {
    case abstractUnix = "abstract-unix"
    case signal
}

/// Why a field could not be decoded.
public struct ProfileFieldError: Error, Sendable, Equatable {
    public var message: String
    public init(_ message: String) { self.message = message }
}

/// A field's encoding: the bytes 0x00-0x20, `%` and 0x7F as `%XX` (upper-case hex), so that a
/// field never holds the separator or a line break, whatever a path or argument contains.
public enum ProfileField {
    public static let separator: UInt8 = 0x20
    public static let newline: UInt8 = 0x0A

    static func mustEncode(_ byte: UInt8) -> Bool { byte <= 0x20 || byte == 0x25 || byte == 0x7F }

    public static func encode(_ field: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(field.utf8.count)
        for byte in field.utf8 {
            if mustEncode(byte) {
                out.append(0x25)
                out.append(hexDigit(byte >> 4))
                out.append(hexDigit(byte & 0xF))
            } else {
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// One record as a line (without its newline): the kind and the encoded fields, as many as
    /// the record's declared shape takes (`ProfileRecord.shape`, which the launcher reads by).
    public static func record(_ kind: ProfileRecord, _ fields: [String]) -> String {
        assert(kind.shape.accepts(fields.count), "'\(kind.rawValue)' takes \(kind.shape)")
        assert(
            kind != .mount
                || fields.first.flatMap(ProfileMountKind.init(rawValue:)).map {
                    $0.fields + 1 == fields.count
                } == true, "mount \(fields)")
        var line = kind.rawValue
        for field in fields {
            line += " "
            line += encode(field)
        }
        return line
    }

    /// Undoes `encode`. The bytes that must be encoded may not appear raw, and the decoded
    /// field must be UTF-8 without NUL.
    public static func decode(_ field: ArraySlice<UInt8>) throws(ProfileFieldError) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(field.count)
        var index = field.startIndex
        while index < field.endIndex {
            let byte = field[index]
            if byte == 0x25 {
                guard field.endIndex - index >= 3, let high = hexValue(field[index + 1]),
                    let low = hexValue(field[index + 2])
                else { throw ProfileFieldError("bad percent escape") }
                bytes.append(high << 4 | low)
                index += 3
            } else if byte <= 0x20 || byte == 0x7F {
                throw ProfileFieldError("byte 0x\(String(byte, radix: 16)) must be encoded")
            } else {
                bytes.append(byte)
                index += 1
            }
        }
        guard !bytes.contains(0) else { throw ProfileFieldError("NUL byte in a field") }
        // Decoding replaces each invalid sequence with U+FFFD (EF BF BD), so the bytes come
        // back unchanged exactly when they were valid UTF-8. Not String(validating:as:): that
        // generic looks up UTF8's associated types and its metadata at run time, on every field.
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.utf8.elementsEqual(bytes) else { throw ProfileFieldError("field is not UTF-8") }
        return text
    }

    /// `text` with its control bytes as `?`, for a message that is one line.
    public static func printable(_ text: String) -> String {
        String(
            decoding: text.utf8.map { $0 < 0x20 || $0 == 0x7F ? UInt8(ascii: "?") : $0 },
            as: UTF8.self)
    }

    static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "A") + value - 10
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
