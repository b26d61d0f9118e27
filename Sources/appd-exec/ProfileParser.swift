import CLinux
import Glibc
import LauncherProtocol

/// Reads profile format version 1 (docs/launcher-protocol.md) strictly: a wrong header, an
/// unknown record, a field count that does not fit, a bad escape or a raw control byte is an
/// error, never skipped. The launcher would rather not run than run something it misread.
/// The records' names and the field encoding are LauncherProtocol's, which the daemon writes with.
struct ProfileParser {
    static let header = ProfileFormat.header

    static func parse(_ bytes: [UInt8]) throws -> Profile {
        // Lines and fields are walked by index, not split into arrays: each array of a new
        // element type is a runtime metadata lookup, paid on every launch.
        var parser = ProfileParser()
        var values: [String] = []
        var lineNumber = 0
        var lineStart = 0
        var headerSeen = false
        while true {
            let newline = bytes[lineStart...].firstIndex(of: ProfileField.newline)
            // The end of the bytes, or the empty piece after the final newline.
            if newline == nil && lineStart == bytes.count { break }
            let line = bytes[lineStart..<(newline ?? bytes.count)]
            lineNumber += 1
            if lineNumber == 1 {
                guard String(decoding: line, as: UTF8.self) == header else { break }
                headerSeen = true
            } else {
                try parser.parseLine(line, number: lineNumber, values: &values)
            }
            guard let newline else { break }
            lineStart = newline + 1
        }
        guard headerSeen else {
            throw LaunchFailure("profile", "line 1: expected the header '\(header)'")
        }
        try parser.profile.validate()
        return parser.profile
    }

    /// One record, read against its declaration (`ProfileRecordReader`: a known kind, a field
    /// count it takes, once-only records once, every field decoded into `values`), then applied.
    private mutating func parseLine(_ line: ArraySlice<UInt8>, number: Int, values: inout [String])
        throws
    {
        do {
            let record = try reader.read(line, into: &values)
            try apply(record, values)
        } catch let failure as ProfileFieldError {
            throw LaunchFailure("profile", "line \(number): \(failure.message)")
        } catch let failure as LaunchFailure {
            throw LaunchFailure("profile", "line \(number): \(failure.message)")
        }
    }

    private var profile = Profile()
    private var reader = ProfileRecordReader()

    /// What a record sets; its field count and how often it appears were checked by the reader.
    private mutating func apply(_ record: ProfileRecord, _ values: [String]) throws {
        switch record {
        case .cgroup:
            profile.cgroups.append(try Self.absolute(values[0]))
        case .relayCgroup:
            profile.relayCgroups.append(try Self.absolute(values[0]))
        case .unshare:
            for name in values {
                guard let namespace = Namespace(rawValue: name) else {
                    throw LaunchFailure("profile", "unknown namespace '\(name)'")
                }
                profile.namespaces.appendUnique(namespace)
            }
        case .hostname:
            profile.hostname = values[0]
        case .loopback:
            profile.loopback = true
        case .root:
            switch values[0] {
            case ProfileFormat.tmpfsRoot:
                guard values.count == 1 else {
                    throw LaunchFailure("profile", "'root tmpfs' takes no other field")
                }
            case ProfileFormat.imageRoot:
                guard
                    values.count == 3 || (values.count == 4 && values[3] == ProfileFormat.ownedRoot)
                else {
                    throw LaunchFailure(
                        "profile", "'root image' takes SRC, ro or rw, and owned or nothing")
                }
                guard values[2] == "ro" || values[2] == "rw" else {
                    throw LaunchFailure("profile", "'root image' ends with ro or rw")
                }
                profile.imageRoot = ImageRoot(
                    source: try Self.absolute(values[1]), readOnly: values[2] == "ro",
                    owned: values.count == 4)
            default:
                throw LaunchFailure("profile", "unknown root '\(singleLine(values[0]))'")
            }
            profile.buildsRoot = true
        case .mount:
            guard let kind = reader.mountKind else {
                throw LaunchFailure("profile", "no mount kind")
            }
            profile.mounts.append(try Self.mount(kind, values))
        case .console:
            profile.console = true
        case .uid:
            profile.uid = try Self.id(values[0])
        case .gid:
            profile.gid = try Self.id(values[0])
        case .groups:
            profile.groups = try values.map(Self.id)
        case .rlimit:
            let resource = appd_rlimit_resource(values[0])
            guard resource >= 0 else {
                throw LaunchFailure("profile", "unknown rlimit '\(values[0])'")
            }
            let soft = try Self.limit(values[1])
            let hard = try Self.limit(values[2])
            guard soft <= hard else {
                throw LaunchFailure("profile", "rlimit \(values[0]): soft limit above hard")
            }
            profile.rlimits.append(
                ResourceLimit(name: values[0], resource: resource, soft: soft, hard: hard))
        case .landlockFS:
            guard let access = FilesystemAccess(rawValue: values[0]) else {
                throw LaunchFailure("profile", "unknown landlock-fs access '\(values[0])'")
            }
            profile.landlockPaths.append((access, try Self.absolute(values[1])))
        case .landlockNet:
            let right = try Self.networkRight(values[0])
            guard let port = Self.number(values[1]), port <= 65535 else {
                throw LaunchFailure("profile", "bad port '\(values[1])'")
            }
            profile.landlockPorts.append((right, port))
        case .landlockNetRestrict:
            profile.landlockNetRestrict.appendUnique(try Self.networkRight(values[0]))
        case .landlockScope:
            guard let scope = LandlockScope(rawValue: values[0]) else {
                throw LaunchFailure("profile", "unknown landlock-scope '\(values[0])'")
            }
            profile.landlockScopes.appendUnique(scope)
        case .landlockMinABI:
            guard let abi = Self.number(values[0]), abi <= 1000 else {
                throw LaunchFailure("profile", "bad landlock-min-abi '\(values[0])'")
            }
            profile.landlockMinABI = Int(abi)
        case .seccomp:
            switch values[0] {
            case ProfileFormat.seccompRequired: profile.seccompRequired = true
            case ProfileFormat.seccompOptional: profile.seccompRequired = false
            default:
                throw LaunchFailure(
                    "profile",
                    "seccomp is '\(ProfileFormat.seccompRequired)' or '\(ProfileFormat.seccompOptional)'"
                )
            }
        case .logDenials:
            profile.logDenials = true
        case .mdwe:
            profile.refuseExecGain = true
        case .memfdNoexec:
            profile.memfdNoexec = true
        case .chdir:
            profile.directory = try Self.absolute(values[0])
        case .env:
            guard let equals = values[0].utf8.firstIndex(of: UInt8(ascii: "=")),
                equals != values[0].utf8.startIndex
            else { throw LaunchFailure("profile", "env needs KEY=VALUE") }
            profile.environment.append(values[0])
        case .exec:
            profile.executable = try Self.absolute(values[0])
        case .arg:
            profile.arguments.append(values[0])
        case .userns:
            let count = try Self.id(values[2])
            let uid = try Self.id(values[0])
            let gid = try Self.id(values[1])
            guard count > 0, count <= 1 << 20, UInt64(uid) + UInt64(count) < UInt64(UInt32.max),
                UInt64(gid) + UInt64(count) < UInt64(UInt32.max), uid > 0, gid > 0
            else { throw LaunchFailure("profile", "bad userns range") }
            profile.userNamespace = UserNamespaceMap(uid: uid, gid: gid, count: count)
        case .capabilities:
            let first = values[0]
            guard let set = ProfileCapabilitySet(rawValue: first) else {
                throw LaunchFailure("profile", "capabilities needs a set name")
            }
            var masks = profile.capabilities ?? CapabilityMasks()
            guard !masks.given.contains(set) else {
                throw LaunchFailure("profile", "capabilities \(first) given twice")
            }
            var bits: UInt64 = 0
            for name in values.dropFirst() {
                guard let number = ProfileCapability.number(name) else {
                    throw LaunchFailure("profile", "unknown capability '\(singleLine(name))'")
                }
                bits |= 1 << UInt64(number)
            }
            switch set {
            case .bounding: masks.bounding = bits
            case .effective: masks.effective = bits
            case .permitted: masks.permitted = bits
            case .inheritable: masks.inheritable = bits
            case .ambient: masks.ambient = bits
            }
            masks.given.append(set)
            profile.capabilities = masks
        case .newPrivileges:
            profile.newPrivileges = true
        case .sysctl:
            guard ProfileSysctl.isNamespaced(values[0]) else {
                throw LaunchFailure(
                    "profile", "sysctl '\(singleLine(values[0]))' is not a namespaced one")
            }
            profile.sysctls.append((values[0], values[1]))
        }
    }

    /// A `mount` record of `mountKind`; the reader looked up its kind and checked its field
    /// count.
    private static func mount(_ mountKind: ProfileMountKind, _ values: [String]) throws
        -> MountRecord
    {
        // By name, as ProfileMountKind.layout lays the fields out.
        func field(_ field: ProfileMountField) -> String { mountKind.value(field, in: values) }
        func destination() throws -> String { try absolute(field(.destination)) }
        func bind(_ bind: BindKind) throws -> MountRecord {
            .bind(bind, source: try absolute(field(.source)), destination: try destination())
        }
        switch mountKind {
        case .roBind: return try bind(.readOnly)
        case .roBindTry: return try bind(.readOnlyTry)
        case .rwBind: return try bind(.readWrite)
        case .rwBindExec: return try bind(.readWriteExec)
        case .devBind: return try bind(.device)
        case .tmpfs: return .tmpfs(destination: try destination(), mode: try mode(field(.mode)))
        case .proc: return .proc(destination: try destination())
        case .dev: return .dev(destination: try destination())
        case .symlink:
            guard !field(.target).isEmpty else {
                throw LaunchFailure("profile", "empty symlink target")
            }
            return .symlink(target: field(.target), destination: try destination())
        case .dir:
            return .directory(destination: try destination(), mode: try mode(field(.mode)))
        case .file:
            return .file(
                destination: try destination(), mode: try mode(field(.mode)),
                content: Array(field(.content).utf8))
        case .fs:
            let types = ["proc", "sysfs", "tmpfs", "devpts", "mqueue", "cgroup", "cgroup2"]
            let type = field(.fsType)
            guard types.contains(type) else {
                throw LaunchFailure("profile", "mount fs of type '\(type)' is not allowed")
            }
            return .filesystem(
                type: type, source: field(.source), destination: try destination(),
                options: field(.options))
        case .mask: return .mask(destination: try destination())
        case .roPath: return .readOnlyPath(destination: try destination())
        case .node:
            // TYPE:MAJOR:MINOR:UID:GID, each number plain decimal.
            let parts = field(.options).split(separator: ":", omittingEmptySubsequences: false)
            let kinds: [Substring: mode_t] = ["c": S_IFCHR, "b": S_IFBLK, "p": S_IFIFO]
            guard parts.count == 5, let kind = kinds[parts[0]],
                let major = number(String(parts[1])), major <= 0xFFF,
                let minor = number(String(parts[2])), minor <= 0xF_FFFF,
                let uid = number(String(parts[3])), uid < UInt64(UInt32.max),
                let gid = number(String(parts[4])), gid < UInt64(UInt32.max)
            else {
                throw LaunchFailure(
                    "profile", "mount node: bad device '\(singleLine(field(.options)))'")
            }
            let permissions = try mode(field(.mode))
            guard permissions & ~0o777 == 0 else {
                throw LaunchFailure(
                    "profile",
                    "mount node: mode \(String(permissions, radix: 8)) is more than rwx bits")
            }
            // The kernel's encoding (makedev): minor's low byte, major, minor's high bits.
            let device = (minor & 0xFF) | (major << 8) | ((minor & ~0xFF) << 12)
            return .node(
                destination: try destination(), kind: kind, mode: permissions,
                device: dev_t(device), uid: UInt32(uid), gid: UInt32(gid))
        }
    }

    /// An absolute path without `..`: destinations must stay inside the new root.
    static func absolute(_ path: String) throws -> String {
        guard path.hasPrefix("/") else {
            throw LaunchFailure("profile", "path '\(path)' is not absolute")
        }
        // A component that is exactly "..", found without splitting the path into an array.
        var length = 0
        var dots = 0
        for byte in path.utf8 {
            if byte == UInt8(ascii: "/") {
                if length == 2 && dots == 2 { break }
                length = 0
                dots = 0
            } else {
                length += 1
                if byte == UInt8(ascii: ".") { dots += 1 }
            }
        }
        guard !(length == 2 && dots == 2) else {
            throw LaunchFailure("profile", "path '\(path)' contains '..'")
        }
        return path
    }

    /// Plain decimal digits, nothing else (no sign, no spaces), up to UInt64.
    static func number(_ text: String) -> UInt64? {
        guard !text.isEmpty, text.utf8.count <= 20,
            text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return nil }
        return UInt64(text)
    }

    /// A uid or gid. 4294967295 is refused: to setresuid it means "leave unchanged".
    static func id(_ text: String) throws -> UInt32 {
        guard let value = number(text), value < UInt64(UInt32.max) else {
            throw LaunchFailure("profile", "bad id '\(text)'")
        }
        return UInt32(value)
    }

    static func limit(_ text: String) throws -> UInt64 {
        if text == ProfileFormat.unlimited { return APPD_RLIM_INFINITY }
        guard let value = number(text), value != APPD_RLIM_INFINITY else {
            throw LaunchFailure("profile", "bad rlimit value '\(text)'")
        }
        return value
    }

    static func mode(_ text: String) throws -> mode_t {
        guard (1...4).contains(text.utf8.count),
            text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "7") }),
            let value = mode_t(text, radix: 8)
        else { throw LaunchFailure("profile", "bad octal mode '\(text)'") }
        return value
    }

    static func networkRight(_ text: String) throws -> NetworkRight {
        guard let right = NetworkRight(rawValue: text) else {
            throw LaunchFailure("profile", "expected 'bind' or 'connect', not '\(text)'")
        }
        return right
    }
}
