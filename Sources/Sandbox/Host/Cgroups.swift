import AppBundle
import AppdBase
import Glibc

/// Resource limits for one instance. `nil` leaves the kernel's default (no limit).
public struct CgroupLimits: Codable, Sendable, Equatable {
    /// Bytes (v2 `memory.max`, v1 `memory.limit_in_bytes`).
    public var memoryMax: Int64?
    /// Tasks, threads included (`pids.max`).
    public var pidsMax: Int?
    /// 1...10000, default 100 (v2 `cpu.weight`; v1 `cpu.shares` = weight * 1024 / 100).
    public var cpuWeight: Int?
    /// v1 `cpu.shares` exactly, 2...262144, when the caller asked in shares (an OCI config):
    /// v1 then gets the shares asked for, not the lossy weight conversion; v2 uses `cpuWeight`.
    public var cpuShares: Int?
    /// CPU time the instance may use per `cpuPeriod`, in microseconds (v2 `cpu.max`, v1
    /// `cpu.cfs_quota_us`): 1000 (the kernel's minimum) up to `maxCPUQuota`.
    public var cpuQuota: Int64?
    /// The period of `cpuQuota` in microseconds, 1000...1000000 (the kernel's range; its
    /// default is 100000) (v2 `cpu.max`, v1 `cpu.cfs_period_us`).
    public var cpuPeriod: Int64?
    /// The CPUs and memory nodes the instance may use, as the kernel lists them (`0-3,6`):
    /// `cpuset.cpus` and `cpuset.mems` (checked by `Cgroups.validateCPUList`).
    public var cpusetCPUs: String?
    public var cpusetMems: String?

    public init(
        memoryMax: Int64? = nil, pidsMax: Int? = nil, cpuWeight: Int? = nil,
        cpuShares: Int? = nil, cpuQuota: Int64? = nil, cpuPeriod: Int64? = nil,
        cpusetCPUs: String? = nil, cpusetMems: String? = nil
    ) {
        self.memoryMax = memoryMax
        self.pidsMax = pidsMax
        self.cpuWeight = cpuWeight
        self.cpuShares = cpuShares
        self.cpuQuota = cpuQuota
        self.cpuPeriod = cpuPeriod
        self.cpusetCPUs = cpusetCPUs
        self.cpusetMems = cpusetMems
    }

    /// The kernel's largest CFS quota: `max_cfs_runtime`, 2^44 - 1 microseconds.
    public static let maxCPUQuota: Int64 = (1 << 44) - 1
    public static let cpuPeriods: ClosedRange<Int64> = 1000...1_000_000
    public static let cpuShareRange: ClosedRange<Int> = 2...262_144

    /// Every value in its range, the cpusets well-formed; the error names the bad one.
    public func validate() throws {
        if let memoryMax, memoryMax < 4096 {
            throw AppdError(.invalidConfig, "memory limit \(memoryMax) bytes is below one page")
        }
        if let pidsMax, pidsMax < 1 {
            throw AppdError(.invalidConfig, "pids limit \(pidsMax) must be at least 1")
        }
        if let cpuWeight, !(1...10000).contains(cpuWeight) {
            throw AppdError(.invalidConfig, "cpu weight \(cpuWeight) is outside 1...10000")
        }
        if let cpuShares, !Self.cpuShareRange.contains(cpuShares) {
            throw AppdError(.invalidConfig, "cpu shares \(cpuShares) are outside 2...262144")
        }
        if let cpuQuota, !(1000...Self.maxCPUQuota).contains(cpuQuota) {
            throw AppdError(
                .invalidConfig,
                "cpu quota \(cpuQuota) microseconds is outside 1000...\(Self.maxCPUQuota)")
        }
        if let cpuPeriod, !Self.cpuPeriods.contains(cpuPeriod) {
            throw AppdError(
                .invalidConfig,
                "cpu period \(cpuPeriod) microseconds is outside 1000...1000000 (1 ms to 1 s)")
        }
        if let cpusetCPUs { try Cgroups.validateCPUList(cpusetCPUs, "cpuset cpus") }
        if let cpusetMems { try Cgroups.validateCPUList(cpusetMems, "cpuset mems") }
    }
}

/// Where instance cgroups go and what they get by default. The `[Sandbox]` section of
/// appd.conf fills this in; the defaults are what appd uses without a config file.
public struct CgroupSettings: Codable, Sendable, Equatable {
    /// The parent of every `<app>/<instance>` cgroup, in each hierarchy. Relative (the
    /// default, `apps`): below appd's own cgroup, which systemd delegates to appd with
    /// `Delegate=yes`. Absolute (`/appd.slice/apps`): from the hierarchy's root.
    public var parent: String = "apps"
    /// On cgroup v2 the daemon's processes leave its own cgroup for this leaf, so that
    /// controllers can be enabled for the subtree (the "no internal processes" rule).
    public var daemonLeaf: String = "daemon"
    public var defaultLimits = CgroupLimits(memoryMax: 512 << 20, pidsMax: 512)
    /// Whether an instance's processes go into its `app/` and `relay/` leaves (a suspend
    /// freezes the app and never its output relay). appd-oci has no relay, and its engine
    /// reads the stats of the cgroup it named, where the processes then are.
    public var instanceLeaves = true
    /// Whether `parent` may be `/` (appd-oci: the engine names the cgroup; appd.conf's
    /// CgroupParent may not).
    public var parentMayBeRoot = false

    public init() {}

    public init(
        parent: String,
        defaultLimits: CgroupLimits = CgroupLimits(
            memoryMax: 512 << 20, pidsMax: 512)
    ) {
        self.parent = parent
        self.defaultLimits = defaultLimits
    }
}

/// Counters that explain why an instance died or stalled.
public struct CgroupEvents: Codable, Sendable, Equatable {
    /// Processes the OOM killer killed in the cgroup (v2 `memory.events` oom_kill, v1
    /// `memory.oom_control` oom_kill).
    public var oomKills: Int64 = 0
    /// Times the memory limit was hit (v2 `memory.events` max, v1 `memory.failcnt`).
    public var memoryLimitHits: Int64 = 0
    /// Forks refused by `pids.max` (`pids.events` max).
    public var pidsLimitHits: Int64 = 0

    public init(oomKills: Int64 = 0, memoryLimitHits: Int64 = 0, pidsLimitHits: Int64 = 0) {
        self.oomKills = oomKills
        self.memoryLimitHits = memoryLimitHits
        self.pidsLimitHits = pidsLimitHits
    }
}

public struct CgroupMemory: Codable, Sendable, Equatable {
    /// Bytes charged now (v1 includes page cache, as v2 does).
    public var current: Int64
    /// The high-water mark, if the kernel keeps one (v2 `memory.peak` needs Linux 5.19).
    public var peak: Int64?
}

/// The cgroup of one running instance: what the launcher joins and what the supervisor
/// freezes, kills and reads. Two implementations: `UnifiedInstanceCgroup` (one v2 directory)
/// and `HybridInstanceCgroup` (one directory per v1 controller, plus the v2 one if mounted).
///
/// In each hierarchy the instance's directory has two leaves, `app/` (the launcher, the
/// sandbox's PID 1 and the app) and `relay/` (the output relay), so that a suspend freezes the
/// app and never the relay: a suspended app's last output still reaches its log. Limits,
/// accounting and kill stay on the instance's directory (the leaves enable no controller:
/// their processes are charged to it). An instance started by an appd from before the leaves,
/// adopted after a restart, has none: everything is in its directory, and that is frozen.
public protocol InstanceCgroup: Sendable, CustomStringConvertible {
    var app: String { get }
    var instance: String { get }
    /// Every directory of this instance, one per hierarchy.
    var directories: [String] { get }
    /// The `cgroup.procs` files the launcher writes its pid into before it does anything
    /// else (`cgroup PATH` records of the launcher profile): the `app` leaf's.
    var procsFiles: [String] { get }
    /// The cgroup v2 directory of `procsFiles` (nil without cgroup v2): the launcher is born in
    /// it (CLONE_INTO_CGROUP) and joins only the others.
    var birthDirectory: String? { get }
    /// The `cgroup.procs` files of the `relay` leaf, where the launcher moves the output relay
    /// it forked (`relay-cgroup PATH` records); empty for an instance without leaves.
    var relayProcsFiles: [String] { get }
    /// Pids of every process in the instance, both leaves (threads are not listed separately).
    func processes() throws -> [pid_t]
    /// Stops every process of the app (its leaf; the relay keeps running) and waits until the
    /// kernel reports it frozen.
    func freeze(timeoutSeconds: Double) throws
    func thaw() throws
    func isFrozen() throws -> Bool
    /// SIGKILLs every process and waits until none is left (zombies do not count: they leave
    /// the cgroup when they exit, before they are reaped).
    func kill(timeoutSeconds: Double) throws
    func events() throws -> CgroupEvents
    func memory() throws -> CgroupMemory
    /// Writes `limits` into the running instance's interface files (a per-app override
    /// changed). A memory limit below what the instance uses makes the kernel reclaim, then
    /// OOM-kill inside the instance, as at any limit.
    func setLimits(_ limits: CgroupLimits) throws
    /// CPU time of every process in it so far (`cpu.stat` usage_usec of the v2 directory, else
    /// v1 `cpuacct.usage`), in microseconds; nil where neither is kept.
    func cpuMicroseconds() throws -> Int64?
    /// Asks the kernel to reclaim the instance's memory down to `target` bytes (into swap or
    /// zswap where the host has them; file pages are dropped), for at most `timeoutSeconds`,
    /// stopping early once `stop()` is true (the instance was thawed). Blocks while the kernel
    /// reclaims: never call it on an actor. nil where the cgroup has no memory controller
    /// (CgroupReclaim.swift).
    func reclaimMemory(to target: Int64, timeoutSeconds: Double, stop: @Sendable () -> Bool)
        throws -> MemoryReclaim?
    /// Removes every directory; the instance must be empty. Missing directories are fine.
    func remove() throws
}

extension InstanceCgroup {
    public func reclaimMemory(
        to target: Int64, timeoutSeconds: Double, stop: @Sendable () -> Bool
    ) throws -> MemoryReclaim? { nil }
    public func freeze() throws { try freeze(timeoutSeconds: 5) }
    public func kill() throws { try kill(timeoutSeconds: 5) }
    public var description: String {
        "cgroup \(app.isEmpty ? "" : app + "/")\(instance) (\(directories.joined(separator: ", ")))"
    }
}

/// Creates instance cgroups on one host layout.
public protocol CgroupDriver: Sendable {
    var layout: CgroupLayout { get }
    var settings: CgroupSettings { get }
    /// The parent directory in each hierarchy appd uses.
    var parentDirectories: [String] { get }
    /// Run once when the daemon starts: creates the parent, and on cgroup v2 moves the
    /// daemon's processes into the leaf `settings.daemonLeaf` and enables the controllers for
    /// the subtree. Safe to call again.
    func prepare() throws
    /// Makes `<parent>/<app>/<instance>` in every hierarchy and applies `limits`
    /// (`settings.defaultLimits` when nil). An empty `app` means no app level:
    /// `<parent>/<instance>` (appd-oci's one-component cgroupsPath, where runc puts the
    /// container in the cgroup named); removing the instance then never removes the parent.
    func create(instance: String, app: String, limits: CgroupLimits?) throws -> any InstanceCgroup
    /// The cgroup of an instance created earlier (after a daemon restart), if it exists.
    func open(instance: String, app: String) throws -> (any InstanceCgroup)?
    /// Bytes charged to the parent, that is to every instance together (memory is accounted
    /// hierarchically): one file read however many instances run. nil when the parent has no
    /// memory accounting (v2 without the memory controller enabled above it).
    func appsMemory() throws -> Int64?
}

extension CgroupDriver {
    /// What every `create` checks first: valid names, and the limits to apply (the default
    /// ones when nil), validated.
    func checkedRequest(instance: String, app: String, limits: CgroupLimits?) throws
        -> CgroupLimits
    {
        if !app.isEmpty { try Cgroups.validateName(app, "app id") }
        try Cgroups.validateName(instance, "instance name")
        let limits = limits ?? settings.defaultLimits
        try limits.validate()
        return limits
    }
}

public enum Cgroups {
    /// The driver for this host: unified v2, or hybrid/legacy v1.
    public static func driver(settings: CgroupSettings = CgroupSettings(), root: String = "")
        throws -> any CgroupDriver
    {
        try driver(layout: CgroupLayout.detect(root: root), settings: settings)
    }

    public static func driver(layout: CgroupLayout, settings: CgroupSettings) throws
        -> any CgroupDriver
    {
        switch layout.mode {
        case .unified: try UnifiedCgroups(layout: layout, settings: settings)
        case .hybrid, .legacy: try HybridCgroups(layout: layout, settings: settings)
        case .none:
            throw AppdError(
                .unsupported, "no cgroup filesystem is mounted",
                hint: "mount cgroup2 on /sys/fs/cgroup (kernel built with CONFIG_CGROUPS=y)")
        }
    }

    /// Longest app id or instance name used as a cgroup directory name.
    public static let maxNameLength = 128

    /// An app id or instance name is one directory name: letters, digits, `.`, `-`, `_`; not
    /// starting with `.`; not shaped like a cgroup interface file (`memory.max`, `cgroup.procs`)
    /// that would collide with the kernel's files in the parent.
    public static func validateName(_ name: String, _ what: String) throws {
        func bad(_ why: String) -> AppdError {
            AppdError(.invalidConfig, "\(what) '\(name)' cannot name a cgroup: \(why)")
        }
        guard !name.isEmpty else { throw bad("it is empty") }
        guard name.utf8.count <= maxNameLength else {
            throw bad("it is longer than \(maxNameLength) bytes")
        }
        guard !name.hasPrefix(".") else { throw bad("it starts with '.'") }
        let allowed = name.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "-"),
                UInt8(ascii: "_"):
                true
            default: false
            }
        }
        guard allowed else { throw bad("only letters, digits, '.', '-' and '_' are allowed") }
        let prefix = name.split(separator: ".").first.map(String.init) ?? name
        if name.contains("."), reservedPrefixes.contains(prefix.lowercased()) {
            throw bad("'\(prefix).' is the prefix of the kernel's cgroup interface files")
        }
        if ["tasks", "notify_on_release", "release_agent"].contains(name) {
            throw bad("it is a cgroup interface file")
        }
    }

    static let reservedPrefixes: Set<String> = CgroupLayout.knownV1Controllers.union([
        "cgroup", "io", "memory", "cpu", "pids", "hugetlb", "rdma", "misc",
    ])

    /// The parent cgroup (path from a hierarchy root) for a hierarchy where we live in `own`.
    /// Three forms: absolute (`/appd`, from the hierarchy's root); below our own cgroup
    /// (`apps`); or below a sibling of our own cgroup (`../appd-apps.service/apps`: a leading
    /// `..`, once, names the cgroup our own sits in; nowhere else is `..` accepted).
    static func parentPath(settings: CgroupSettings, own: String?) throws -> String {
        let parent = settings.parent
        var components = parent.split(separator: "/")
        let sibling = !parent.hasPrefix("/") && components.first == ".."
        if sibling { components.removeFirst() }
        // `/` itself, the hierarchy's root, only where the caller asks for it: appd-oci, whose
        // engine names the whole path (`/libpod_parent/libpod-ID`). As appd.conf's
        // CgroupParent it would put apps beside the host's services: refused.
        guard !components.contains(where: { $0 == ".." || $0 == "." }),
            !components.isEmpty || (parent == "/" && settings.parentMayBeRoot)
        else {
            throw AppdError(
                .invalidConfig,
                "cgroup parent '\(parent)' must be a path without '.' or '..' components "
                    + "(a leading '../' once names a sibling of appd's own cgroup)")
        }
        if parent.hasPrefix("/") { return "/" + components.joined(separator: "/") }
        guard let own else {
            throw AppdError(
                .unsupported,
                "appd's own cgroup is not visible (outside its cgroup namespace), so the "
                    + "relative cgroup parent '\(parent)' has nothing to be relative to",
                hint: "set an absolute cgroup parent in appd.conf")
        }
        var base = own == "/" ? "" : own
        if sibling {
            guard !base.isEmpty else {
                throw AppdError(
                    .invalidConfig,
                    "cgroup parent '\(parent)' names a sibling of appd's own cgroup, but appd "
                        + "runs in the root cgroup")
            }
            base = String(base[..<(base.lastIndex(of: "/") ?? base.startIndex)])
        }
        return base + "/" + components.joined(separator: "/")
    }

    /// Where instance cgroups go when appd.conf does not say (`CgroupParent=` empty).
    /// - Not under systemd: `/appd` from the root of each hierarchy.
    /// - Under systemd on a unified (v2) host: below the sibling unit `appd-apps.service`
    ///   (Delegate=yes, shipped with appd), never below appd.service itself. cgroup v2 lets a
    ///   cgroup hold processes or hand controllers to children, not both: were the instances
    ///   below appd.service, its cgroup would have controllers enabled, and systemd (before 254's
    ///   DelegateSubgroup=) could not put the next appd into it: every restart with an app
    ///   running failed with 219/CGROUP (issue 17). In a sibling, appd.service holds appd alone.
    /// - Under systemd on a hybrid or v1 host: `apps` below appd's own cgroup (v1 has no such
    ///   rule, and systemd delegates appd.service's subtree in each hierarchy).
    public static func defaultParent(layout: CgroupLayout, underSystemd: Bool) -> String {
        guard underSystemd else { return "/appd" }
        return layout.mode == .unified ? "../" + appsUnit + "/apps" : "apps"
    }

    /// The parent in force: `[Supervisor] CgroupParent=` when set, else `defaultParent`. The
    /// daemon and `appd run` both ask here, so an admin's parent holds for each.
    public static func parent(configured: String, layout: CgroupLayout, underSystemd: Bool)
        -> String
    {
        configured.isEmpty
            ? defaultParent(layout: layout, underSystemd: underSystemd) : configured
    }

    /// The leaves of an instance's cgroup (`InstanceCgroup`).
    public static let appLeaf = "app"
    public static let relayLeaf = "relay"

    /// The instance's cgroup path for a process's cgroup path: the path without its leaf.
    public static func instancePath(of path: Substring) -> Substring {
        for leaf in [appLeaf, relayLeaf] where path.hasSuffix("/" + leaf) {
            return path.dropLast(leaf.utf8.count + 1)
        }
        return path
    }

    /// The unit owning the instances' cgroups on cgroup v2 under systemd (systemd/appd-apps.service).
    public static let appsUnit = "appd-apps.service"
    /// The leaf of that unit's cgroup its own process (`sleep infinity`) is moved into.
    static let holderLeaf = "holder"
}
