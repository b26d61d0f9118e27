import Glibc

/// How the host mounts cgroups, and where appd's own process sits in each hierarchy.
///
/// Read from `/proc/self/mountinfo` (which cgroup filesystems are mounted where) and
/// `/proc/self/cgroup` (our cgroup in each hierarchy). Three shapes occur:
/// - `unified`: one cgroup2 tree holding the controllers (systemd's default since 2021).
/// - `hybrid`: v1 hierarchies per controller plus a cgroup2 tree without them, usually at
///   `/sys/fs/cgroup/unified` (older systemd; the machines appd is developed on).
/// - `legacy`: v1 only.
public struct CgroupLayout: Codable, Sendable, Equatable {
    public enum Mode: String, Codable, Sendable {
        case unified, hybrid, legacy, none
    }

    /// One mounted cgroup hierarchy.
    public struct Hierarchy: Codable, Sendable, Equatable {
        /// 1 or 2.
        public var version: Int
        /// v1: the controllers bound to this hierarchy (`name=systemd` hierarchies have none);
        /// v2: the controllers listed in the root's `cgroup.controllers` (filled by `detect`).
        public var controllers: [String]
        /// Where it is mounted (prefixed with the detection root, so tests can use fake trees).
        public var mountPoint: String
        /// The cgroup the mount shows at its top (`/` unless bind-mounted from a subtree).
        public var mountRoot: String
        /// Our cgroup in this hierarchy as a path from the hierarchy's root (`/` = the root),
        /// or nil when it is not visible through the mount (outside our cgroup namespace).
        public var ownCgroup: String?

        public init(
            version: Int, controllers: [String], mountPoint: String, mountRoot: String = "/",
            ownCgroup: String? = "/"
        ) {
            self.version = version
            self.controllers = controllers
            self.mountPoint = mountPoint
            self.mountRoot = mountRoot
            self.ownCgroup = ownCgroup
        }

        /// The directory of cgroup `path` (a path from the hierarchy root), or nil when the
        /// mount does not show it.
        public func directory(of path: String) -> String? {
            let root = mountRoot == "/" ? "" : mountRoot
            guard path == mountRoot || root.isEmpty || path.hasPrefix(root + "/") else {
                return nil
            }
            let rest = String(path.dropFirst(root.count))
            return rest == "/" || rest.isEmpty ? mountPoint : mountPoint + rest
        }

        /// Our own cgroup's directory, when visible.
        public var ownDirectory: String? { ownCgroup.flatMap(directory(of:)) }
    }

    public var mode: Mode
    /// The cgroup2 tree, if one is mounted.
    public var unified: Hierarchy?
    /// v1 hierarchies that carry controllers, in mountinfo order.
    public var v1: [Hierarchy]

    public init(mode: Mode, unified: Hierarchy?, v1: [Hierarchy]) {
        self.mode = mode
        self.unified = unified
        self.v1 = v1
    }

    /// The v1 hierarchy carrying `controller`, if any.
    public func v1Hierarchy(for controller: String) -> Hierarchy? {
        v1.first { $0.controllers.contains(controller) }
    }

    /// Reads the running system's layout; `root` prefixes every path (tests pass a fake tree).
    public static func detect(root: String = "") -> CgroupLayout {
        let mountinfo = (try? CgroupFS.read(root + "/proc/self/mountinfo").get()) ?? ""
        let cgroup = (try? CgroupFS.read(root + "/proc/self/cgroup").get()) ?? ""
        var layout = parse(mountinfo: mountinfo, procSelfCgroup: cgroup, root: root)
        if var unified = layout.unified {
            let text = (try? CgroupFS.read(unified.mountPoint + "/cgroup.controllers").get()) ?? ""
            unified.controllers = text.split(whereSeparator: \.isWhitespace).map(String.init)
            layout.unified = unified
        }
        return layout
    }

    /// The controllers appd limits. If any of them sits on a v1 hierarchy the host is hybrid
    /// (or legacy) for appd's purposes, whatever else is mounted.
    static let limitControllers = ["memory", "pids", "cpu"]

    /// Pure parsing of the two /proc files, for `detect` and for tests.
    public static func parse(mountinfo: String, procSelfCgroup: String, root: String = "")
        -> CgroupLayout
    {
        // /proc/self/cgroup: "ID:CONTROLLERS:PATH"; ID 0 with empty controllers is cgroup2.
        var ownV1: [Set<String>: String] = [:]
        var ownV2: String?
        for line in procSelfCgroup.split(separator: "\n") {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            let path = String(fields[2])
            if fields[0] == "0" && fields[1].isEmpty {
                ownV2 = path
            } else {
                ownV1[Set(fields[1].split(separator: ",").map(String.init))] = path
            }
        }
        var unified: Hierarchy?
        var v1: [Hierarchy] = []
        for line in mountinfo.split(separator: "\n") {
            guard let mount = MountInfoLine(line) else { continue }
            switch mount.fileSystem {
            case "cgroup2" where unified == nil:
                unified = Hierarchy(
                    version: 2, controllers: [], mountPoint: root + mount.mountPoint,
                    mountRoot: mount.root, ownCgroup: visible(ownV2))
            case "cgroup":
                let options = mount.superOptions.split(separator: ",").map(String.init)
                let controllers = options.filter(knownV1Controllers.contains)
                // Named hierarchies (name=systemd) carry no controllers; bind mounts repeat.
                guard !controllers.isEmpty,
                    !v1.contains(where: { Set($0.controllers) == Set(controllers) })
                else { continue }
                let key = Set(controllers)
                v1.append(
                    Hierarchy(
                        version: 1, controllers: controllers, mountPoint: root + mount.mountPoint,
                        mountRoot: mount.root, ownCgroup: visible(ownV1[key])))
            default:
                continue
            }
        }
        let limitsOnV1 = v1.contains { !Set($0.controllers).isDisjoint(with: limitControllers) }
        let mode: Mode =
            switch (unified != nil, limitsOnV1) {
            case (true, false): .unified
            case (true, true): .hybrid
            case (false, true): .legacy
            case (false, false): .none
            }
        return CgroupLayout(mode: mode, unified: unified, v1: v1)
    }

    /// Paths starting `/..` lie outside our cgroup namespace: the mount cannot reach them.
    private static func visible(_ path: String?) -> String? {
        guard let path, path.hasPrefix("/"), !path.hasPrefix("/..") else { return nil }
        return path
    }

    static let knownV1Controllers: Set<String> = [
        "cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "net_cls", "net_prio",
        "blkio", "perf_event", "hugetlb", "pids", "rdma", "misc", "debug",
    ]
}

/// One line of /proc/self/mountinfo:
/// `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS`.
struct MountInfoLine {
    var root: String
    var mountPoint: String
    var fileSystem: String
    var superOptions: String

    init?(_ line: Substring) {
        let fields = line.split(separator: " ")
        guard let dash = fields.firstIndex(of: "-"), dash >= 6, fields.count >= dash + 3 else {
            return nil
        }
        root = Self.unescape(fields[3])
        mountPoint = Self.unescape(fields[4])
        fileSystem = String(fields[dash + 1])
        superOptions = fields.count > dash + 3 ? String(fields[dash + 3]) : ""
    }

    /// mountinfo writes space, tab, newline and backslash as `\ooo` octal escapes.
    static func unescape(_ field: Substring) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(field.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "\\"), utf8.count >= 3,
                let value = UInt8(String(decoding: utf8.prefix(3), as: UTF8.self), radix: 8)
            {
                bytes.append(value)
                utf8 = utf8.dropFirst(3)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
