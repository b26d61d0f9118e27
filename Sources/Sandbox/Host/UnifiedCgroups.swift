import AppBundle
import AppdBase
import Glibc

/// Instance cgroups on a unified cgroup v2 host (systemd's default).
///
/// Under systemd, appd.service has `Delegate=yes`: the service's cgroup (our line `0::/PATH`
/// in /proc/self/cgroup) and everything below it belongs to appd. cgroup v2 lets a cgroup
/// either hold processes or hand controllers to children ("no internal processes"), never both
/// (the root excepted). So `prepare()` first moves the daemon's own processes into the leaf
/// `<own>/daemon`, then enables memory, pids, cpu and cpuset in `<own>/cgroup.subtree_control`,
/// and in each level down to `<own>/apps/<app>` (cpuset: an empty `cpuset.cpus` inherits the
/// parent's, so enabling it changes nothing until a limit names CPUs):
///
/// ```
/// <own>/                 subtree_control: +memory +pids +cpu +cpuset (no processes)
///     daemon/            appd itself
///     apps/              subtree_control: +memory +pids +cpu +cpuset
///         <app-id>/      subtree_control: +memory +pids +cpu +cpuset
///             <instance>/    memory.max pids.max cpu.weight cpu.max cpuset.* (no processes)
///                 app/       the launcher and the app: what a suspend freezes
///                 relay/     the output relay, never frozen
/// ```
///
/// The leaves enable no controller, so their processes are charged to `<instance>`, whose
/// limits hold for both; `cgroup.kill` of `<instance>` ends both. With an empty app id
/// (appd-oci's one-component cgroupsPath) the instance is `<parent>/<instance>`, and the
/// parent is never removed.
struct UnifiedCgroups: CgroupDriver {
    let layout: CgroupLayout
    let settings: CgroupSettings
    let hierarchy: CgroupLayout.Hierarchy
    let parentPath: String
    let parent: CgroupDirectory

    /// The controllers appd enables for its subtree, where the kernel offers them.
    static let controllers = ["memory", "pids", "cpu", "cpuset"]

    init(layout: CgroupLayout, settings: CgroupSettings) throws {
        guard let hierarchy = layout.unified else {
            throw AppdError(.unsupported, "no cgroup2 filesystem is mounted")
        }
        self.layout = layout
        self.settings = settings
        self.hierarchy = hierarchy
        parentPath = try Cgroups.parentPath(settings: settings, own: hierarchy.ownCgroup)
        guard let directory = hierarchy.directory(of: parentPath) else {
            throw AppdError(
                .unsupported,
                "cgroup \(parentPath) is not visible through the cgroup2 mount at "
                    + hierarchy.mountPoint
            )
        }
        parent = CgroupDirectory(directory)
        try Cgroups.validateName(settings.daemonLeaf, "daemon leaf cgroup")
    }

    var parentDirectories: [String] { [parent.path] }

    func appsMemory() throws -> Int64? { try parent.number("memory.current") }

    func prepare() throws {
        var directory: CgroupDirectory
        let below = Self.isBelow(parentPath, hierarchy.ownCgroup)
        if below, let own = hierarchy.ownDirectory {
            directory = CgroupDirectory(own)
            // The root cgroup is exempt from the rule, and its processes are the whole system.
            if hierarchy.ownCgroup != "/" {
                try moveProcessesIntoLeaf(own, leaf: settings.daemonLeaf)
            }
        } else if settings.parent.hasPrefix("../"), let own = hierarchy.ownCgroup {
            // A sibling of our own cgroup: a unit systemd delegates (appd-apps.service). It
            // must exist: a cgroup appd made there itself would be one systemd does not know.
            let siblingName = settings.parent.split(separator: "/")[1]
            let container = String(own[..<(own.lastIndex(of: "/") ?? own.startIndex)])
            guard let sibling = hierarchy.directory(of: container + "/" + siblingName),
                CgroupFS.isDirectory(sibling)
            else {
                throw AppdError(
                    .unsupported,
                    "the cgroup \(container)/\(siblingName) that instance cgroups go below does "
                        + "not exist",
                    hint: "start \(siblingName) (appd.service wants it; systemctl start "
                        + "\(siblingName)), or set CgroupParent= in appd.conf")
            }
            // Its own process (a `sleep infinity` that keeps the unit and its cgroup alive:
            // systemd removes the cgroup of a unit with no process) moves into a leaf, so that
            // the unit's cgroup can enable controllers for the instances.
            try moveProcessesIntoLeaf(sibling, leaf: Cgroups.holderLeaf)
            directory = CgroupDirectory(sibling)
        } else {
            directory = CgroupDirectory(hierarchy.mountPoint)
        }
        let rest = parent.path.dropFirst(directory.path.count).split(separator: "/")
        for component in rest {
            try enableControllers(in: directory)
            directory = CgroupDirectory(directory.path + "/" + component)
            try directory.make(existingIsFine: true)
        }
        try enableControllers(in: directory)
    }

    /// Whether cgroup `path` lies strictly below `own` (then appd must leave `own` for a leaf).
    static func isBelow(_ path: String, _ own: String?) -> Bool {
        guard let own else { return false }
        return own == "/" ? path != "/" : path.hasPrefix(own + "/")
    }

    /// Moves every process of `own` into `<own>/<leaf>`. Repeats while the daemon forks (a
    /// process forked during the move inherits the old cgroup).
    private func moveProcessesIntoLeaf(_ own: String, leaf leafName: String) throws {
        let here = CgroupDirectory(own)
        let leaf = CgroupDirectory(own + "/" + leafName)
        for _ in 0..<20 {
            let pids = try here.processes()
            if pids.isEmpty { return }
            try leaf.make(existingIsFine: true)
            for pid in pids {
                switch CgroupFS.write(String(pid), to: leaf.file("cgroup.procs")) {
                case .success: continue
                case .failure(let error) where error.code == ESRCH: continue
                case .failure(let error):
                    throw AppdError.cgroup("failed to move pid \(pid) into", leaf.path, error)
                }
            }
        }
        throw AppdError(
            .io,
            "processes keep appearing in \(own) while moving them into "
                + "\(leaf.path)")
    }

    /// Writes `+memory +pids +cpu +cpuset` (those the parent offers and not yet enabled).
    private func enableControllers(in directory: CgroupDirectory) throws {
        let available = Set(
            try directory.read("cgroup.controllers").split(separator: " ")
                .map { String($0.filter { !$0.isWhitespace }) })
        let enabled = Set(
            try directory.read("cgroup.subtree_control").split(separator: " ")
                .map { String($0.filter { !$0.isWhitespace }) })
        let missing = Self.controllers.filter { available.contains($0) && !enabled.contains($0) }
        guard !missing.isEmpty else { return }
        try directory.write(
            missing.map { "+" + $0 }.joined(separator: " "),
            "cgroup.subtree_control")
    }

    /// Enables cpuset in every level from the hierarchy's root down to `directory`'s parent
    /// where it is not yet: an engine's parent (podman's `machine.slice`, enabled only for the
    /// controllers its units use) may lack it, and the instance then has no `cpuset.cpus` to
    /// write. Only when a cpuset is asked; the other controllers are the parent's business.
    func enableCpuset(above directory: CgroupDirectory) throws {
        guard !CgroupFS.exists(directory.file("cpuset.cpus")) else { return }
        let root = hierarchy.mountPoint
        guard directory.path.hasPrefix(root + "/") else { return }
        var level = CgroupDirectory(root)
        for component in directory.path.dropFirst(root.count).split(separator: "/").dropLast() {
            try enableCpuset(in: level)
            level = level.leaf(String(component))
        }
        try enableCpuset(in: level)
    }

    private func enableCpuset(in directory: CgroupDirectory) throws {
        func words(_ file: String) throws -> [Substring] {
            try directory.read(file).split(whereSeparator: \.isWhitespace)
        }
        guard !(try words("cgroup.subtree_control").contains("cpuset")) else { return }
        guard try words("cgroup.controllers").contains("cpuset") else {
            throw AppdError(
                .unsupported,
                "cannot limit cpuset: \(directory.path) does not offer the controller",
                hint: "build the kernel with CONFIG_CPUSETS=y; under systemd, delegate cpuset")
        }
        try directory.write("+cpuset", "cgroup.subtree_control")
    }

    /// The interface files and values for `limits`.
    static func limitFiles(_ limits: CgroupLimits) -> [(file: String, value: String)] {
        var files: [(file: String, value: String)] = []
        if let memory = limits.memoryMax { files.append(("memory.max", String(memory))) }
        if let pids = limits.pidsMax { files.append(("pids.max", String(pids))) }
        if let weight = limits.cpuWeight { files.append(("cpu.weight", String(weight))) }
        // "QUOTA PERIOD"; "max PERIOD" sets the period alone; a quota alone keeps the period.
        if limits.cpuQuota != nil || limits.cpuPeriod != nil {
            let quota = limits.cpuQuota.map(String.init) ?? "max"
            files.append(("cpu.max", quota + (limits.cpuPeriod.map { " \($0)" } ?? "")))
        }
        if let cpus = limits.cpusetCPUs { files.append(("cpuset.cpus", cpus)) }
        if let mems = limits.cpusetMems { files.append(("cpuset.mems", mems)) }
        return files
    }

    func create(instance: String, app: String, limits: CgroupLimits?) throws
        -> any InstanceCgroup
    {
        let limits = try checkedRequest(instance: instance, app: app, limits: limits)
        if !CgroupFS.isDirectory(parent.path) { try prepare() }
        let appDirectory = app.isEmpty ? nil : CgroupDirectory(parent.path + "/" + app)
        let directory = CgroupDirectory((appDirectory ?? parent).path + "/" + instance)
        // Another instance's remove() may rmdir the app level between our two mkdirs.
        for attempt in 0..<3 {
            try appDirectory?.make(existingIsFine: true)
            try enableControllers(in: appDirectory ?? parent)
            do {
                try directory.make(existingIsFine: false)
                break
            } catch let error as AppdError where error.errno == ENOENT && attempt < 2 {
                continue
            }
        }
        let cgroup = UnifiedInstanceCgroup(
            app: app, instance: instance, directory: directory, appDirectory: appDirectory,
            hasLeaves: settings.instanceLeaves)
        do {
            if limits.cpusetCPUs != nil || limits.cpusetMems != nil {
                try enableCpuset(above: directory)
            }
            for (file, value) in Self.limitFiles(limits) { try directory.write(value, file) }
            for leaf in cgroup.leaves { try leaf.make(existingIsFine: false) }
        } catch {
            try? cgroup.remove()
            throw error
        }
        return cgroup
    }

    func open(instance: String, app: String) throws -> (any InstanceCgroup)? {
        if !app.isEmpty { try Cgroups.validateName(app, "app id") }
        try Cgroups.validateName(instance, "instance name")
        let appDirectory = app.isEmpty ? nil : CgroupDirectory(parent.path + "/" + app)
        let directory = CgroupDirectory((appDirectory ?? parent).path + "/" + instance)
        guard CgroupFS.isDirectory(directory.path) else { return nil }
        return UnifiedInstanceCgroup(
            app: app, instance: instance, directory: directory, appDirectory: appDirectory,
            hasLeaves: CgroupFS.isDirectory(directory.path + "/" + Cgroups.appLeaf))
    }
}

struct UnifiedInstanceCgroup: InstanceCgroup {
    let app: String
    let instance: String
    let directory: CgroupDirectory
    /// The per-app level, removed when unused; nil without an app id (never the parent).
    let appDirectory: CgroupDirectory?
    /// False for an instance an older appd made (adopted): no `app` and `relay` leaves.
    let hasLeaves: Bool

    var directories: [String] { [directory.path] }
    var procsFiles: [String] { [frozenPart.file("cgroup.procs")] }
    var birthDirectory: String? { frozenPart.path }
    var relayProcsFiles: [String] {
        hasLeaves ? [directory.leaf(Cgroups.relayLeaf).file("cgroup.procs")] : []
    }
    var leaves: [CgroupDirectory] {
        hasLeaves ? [directory.leaf(Cgroups.appLeaf), directory.leaf(Cgroups.relayLeaf)] : []
    }
    /// What a suspend freezes: the app's leaf, or the whole instance without leaves.
    var frozenPart: CgroupDirectory { hasLeaves ? directory.leaf(Cgroups.appLeaf) : directory }
    private var allProcsFiles: [String] { ([directory] + leaves).map { $0.file("cgroup.procs") } }

    func processes() throws -> [pid_t] { try directory.processes(leaves: leaves) }

    func freeze(timeoutSeconds: Double) throws {
        try frozenPart.setFrozen(true, timeoutSeconds: timeoutSeconds)
    }

    func thaw() throws { try frozenPart.setFrozen(false, timeoutSeconds: 5) }

    func setLimits(_ limits: CgroupLimits) throws {
        try limits.validate()
        for (file, value) in UnifiedCgroups.limitFiles(limits) { try directory.write(value, file) }
    }

    func isFrozen() throws -> Bool { try frozenPart.isFrozen() }

    func kill(timeoutSeconds: Double) throws {
        try directory.killAll(procsFiles: allProcsFiles, timeoutSeconds: timeoutSeconds)
    }

    func events() throws -> CgroupEvents {
        let memory = try directory.counters("memory.events")
        let pids = try directory.counters("pids.events")
        return CgroupEvents(
            oomKills: memory["oom_kill"] ?? 0,
            memoryLimitHits: memory["max"] ?? 0, pidsLimitHits: pids["max"] ?? 0)
    }

    func memory() throws -> CgroupMemory {
        guard let current = try directory.number("memory.current") else {
            throw AppdError(
                .unsupported, "\(directory.path) has no memory controller",
                hint: "enable memory in the parent's cgroup.subtree_control (Delegate=yes)")
        }
        return CgroupMemory(current: current, peak: try directory.number("memory.peak"))
    }

    func cpuMicroseconds() throws -> Int64? { try directory.counters("cpu.stat")["usage_usec"] }

    func reclaimMemory(to target: Int64, timeoutSeconds: Double, stop: @Sendable () -> Bool)
        throws -> MemoryReclaim?
    {
        try CgroupReclaim.unified(
            directory, target: target, timeoutSeconds: timeoutSeconds, stop: stop)
    }

    func remove() throws {
        try directory.remove(leaves: leaves)
        appDirectory?.removeIfUnused()
    }
}
