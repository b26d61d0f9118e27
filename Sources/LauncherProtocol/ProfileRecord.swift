/// The kind of each record (its first field), declared once with its shape: how many fields
/// follow the kind and whether it may appear more than once. The launcher reads every line
/// through `ProfileRecordReader`, which holds it to this shape before a value is looked at;
/// the daemon writes through `ProfileField.record`, which holds what it writes to the same
/// shape, and LauncherProtocolTests round-trip every kind.
public enum ProfileRecord: String, Sendable, CaseIterable {
    case cgroup
    case relayCgroup = "relay-cgroup"
    case unshare
    case hostname
    case loopback
    case root
    case mount
    case console
    case uid
    case gid
    case groups
    case rlimit
    case landlockMinABI = "landlock-min-abi"
    case landlockFS = "landlock-fs"
    case landlockNetRestrict = "landlock-net-restrict"
    case landlockNet = "landlock-net"
    case landlockScope = "landlock-scope"
    case seccomp
    case logDenials = "log-denials"
    case mdwe
    case memfdNoexec = "memfd-noexec"
    case chdir
    case env
    case exec
    case arg
    // A plain OCI container's records (docs/oci-runtime.md, "Plain containers"); an app's
    // profile never holds them.
    /// `userns UID GID COUNT`: the app process enters a user namespace of its own whose ids
    /// 0..COUNT-1 are the host's UID.. and GID..; `uid`, `gid` and `groups` are ids inside it.
    case userns
    /// `capabilities SET NAME...`: the app's SET (bounding, effective, permitted, inheritable,
    /// ambient) is exactly these, in its user namespace. Needs `userns`.
    case capabilities
    /// `new-privileges`: no_new_privs is left unset (the config's noNewPrivileges: false).
    /// Needs `userns`.
    case newPrivileges = "new-privileges"
    /// `sysctl NAME VALUE`: written by PID 1 under /proc/sys once the root is built.
    case sysctl

    /// How many fields follow the kind, and how often the record may appear.
    public var shape: ProfileRecordShape {
        switch self {
        // Flags: present or not.
        case .loopback, .console, .logDenials, .mdwe, .memfdNoexec, .newPrivileges: .once(0)
        // One value, once.
        case .hostname, .uid, .gid, .landlockMinABI, .seccomp, .chdir, .exec: .once(1)
        // One value per record, as many records as there are values.
        case .cgroup, .relayCgroup, .landlockNetRestrict, .landlockScope, .env, .arg: .many(1)
        case .landlockFS, .landlockNet, .sysctl: .many(2)
        case .rlimit: .many(3)
        case .userns: .once(3)
        // `root tmpfs`, or `root image SRC ro|rw [owned]`.
        case .root: ProfileRecordShape(fields: 1, upTo: 4, once: true)
        // Lists: the names, ids, or the set and its capabilities.
        case .unshare: ProfileRecordShape(fields: 1, upTo: .max, once: false)
        case .groups: ProfileRecordShape(fields: 0, upTo: .max, once: true)
        case .capabilities: ProfileRecordShape(fields: 1, upTo: .max, once: false)
        // The mount kind, then as many fields as it takes (`ProfileMountKind.fields`).
        case .mount: ProfileRecordShape(fields: 1, upTo: .max, once: false)
        }
    }
}

/// A record's shape: `fields...upTo` fields after its kind; `once`: it may appear only once.
public struct ProfileRecordShape: Sendable, Equatable {
    public var fields: Int
    public var upTo: Int
    public var once: Bool

    public init(fields: Int, upTo: Int, once: Bool) {
        self.fields = fields
        self.upTo = upTo
        self.once = once
    }

    static func once(_ count: Int) -> ProfileRecordShape {
        ProfileRecordShape(fields: count, upTo: count, once: true)
    }

    static func many(_ count: Int) -> ProfileRecordShape {
        ProfileRecordShape(fields: count, upTo: count, once: false)
    }

    public func accepts(_ count: Int) -> Bool { count >= fields && count <= upTo }
}

/// A field of a `mount` record, after its kind.
public enum ProfileMountField: Sendable {
    /// A bind's host path, a kernel filesystem's source.
    case source
    /// Where it goes in the new root.
    case destination
    /// A symlink's target.
    case target
    /// The octal mode of a tmpfs, folder or file.
    case mode
    /// A file's content.
    case content
    /// A kernel filesystem's type (proc, sysfs, tmpfs…).
    case fsType
    /// A kernel filesystem's comma-separated options.
    case options
}

extension ProfileMountKind {
    /// The fields that follow the mount kind, in order: declared once, for the daemon's encoder
    /// and the launcher's parser (`mount ro-bind SRC DEST`: source, destination).
    public var layout: [ProfileMountField] {
        switch self {
        case .roBind, .roBindTry, .rwBind, .rwBindExec, .devBind: [.source, .destination]
        case .symlink: [.target, .destination]
        case .tmpfs, .dir: [.destination, .mode]
        case .proc, .dev, .mask, .roPath: [.destination]
        case .file: [.destination, .mode, .content]
        case .fs: [.fsType, .source, .destination, .options]
        case .node: [.destination, .mode, .options]
        }
    }

    /// How many fields follow the mount kind.
    public var fields: Int { layout.count }

    /// `field` of a record of this kind whose fields after `mount` are `values` (the kind
    /// first); "" for a field this kind does not have. The reader has checked the count.
    public func value(_ field: ProfileMountField, in values: [String]) -> String {
        guard let index = layout.firstIndex(of: field), index + 1 < values.count else { return "" }
        return values[index + 1]
    }
}

/// Reads a profile's records against their declaration (`ProfileRecord.shape`): each line's
/// kind must be a known record, its field count one the record takes, a once-only record not
/// seen before, and each field a valid encoding (`ProfileField.decode`). What the values mean
/// (a path, an id, a mode) is the launcher's to check. Lines and fields are walked by index:
/// each array of a new element type is a runtime metadata lookup, paid on every launch.
public struct ProfileRecordReader {
    /// The once-only records seen so far, by name.
    private var seen: [String] = []
    /// The kind of the last `mount` read (its first field), looked up once.
    public private(set) var mountKind: ProfileMountKind?

    public init() {}

    /// The record on `line` (without its newline), its fields decoded into `values` (reused).
    public mutating func read(_ line: ArraySlice<UInt8>, into values: inout [String])
        throws(ProfileFieldError) -> ProfileRecord
    {
        values.removeAll(keepingCapacity: true)
        var kind: String?
        var fieldStart = line.startIndex
        var index = line.startIndex
        while true {
            if index == line.endIndex || line[index] == ProfileField.separator {
                let field = line[fieldStart..<index]
                if kind == nil {
                    kind = String(decoding: field, as: UTF8.self)
                } else {
                    values.append(try ProfileField.decode(field))
                }
                fieldStart = index + 1
            }
            if index == line.endIndex { break }
            index += 1
        }
        let name = kind ?? ""
        guard let record = ProfileRecord(rawValue: name) else {
            throw ProfileFieldError("unknown record '\(ProfileField.printable(name))'")
        }
        let shape = record.shape
        guard shape.accepts(values.count) else {
            throw ProfileFieldError(
                shape.fields == shape.upTo
                    ? "'\(name)' takes \(shape.fields) field(s)"
                    : values.count < shape.fields
                        ? "'\(name)' takes at least \(shape.fields) field(s)"
                        : "'\(name)' takes at most \(shape.upTo) field(s)")
        }
        if record == .mount {
            guard let mount = ProfileMountKind(rawValue: values[0]) else {
                throw ProfileFieldError(
                    "unknown mount kind '\(ProfileField.printable(values[0]))'")
            }
            guard values.count == mount.fields + 1 else {
                throw ProfileFieldError("'mount \(values[0])' takes \(mount.fields) field(s)")
            }
            mountKind = mount
        }
        if shape.once {
            guard !seen.contains(name) else {
                throw ProfileFieldError("'\(name)' may appear only once")
            }
            seen.append(name)
        }
        return record
    }
}
