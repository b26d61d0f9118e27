import AppBundle
import AppdBase
import Glibc

/// Instance cgroups on a hybrid host: v1 hierarchies for memory, pids, cpu and cpuset (each
/// mounted at `/sys/fs/cgroup/<controller>`), cpuacct and blkio for the stats, plus the controller-less v2 tree (usually
/// `/sys/fs/cgroup/unified`), which still offers `cgroup.freeze` (5.2) and `cgroup.kill` (5.14).
/// Also serves v1-only (legacy) hosts, freezing through the v1 freezer hierarchy instead.
///
/// An instance is one directory per hierarchy, `<parent>/<app>/<instance>`, where a relative
/// parent is taken below appd's own cgroup *in that hierarchy*; with an empty app id (appd-oci's
/// one-component cgroupsPath) it is `<parent>/<instance>`, and the parent is never removed. In
/// the cpuset hierarchy — used only by an instance whose limits hold a cpuset, since a host may
/// not let appd write there at all (systemd delegates no v1 hierarchy, a container gets it
/// read-only) — every level gets its parent's cpus and mems (CgroupCPU.swift). v1 has
/// no "no internal processes" rule, so nothing has to move. Only the hierarchy a suspend freezes
/// — the v2 tree, or the v1 freezer on a legacy host — has the leaves `app/` and `relay/`
/// (InstanceCgroup), so that the relay runs on while the app is frozen: the launcher is born in
/// the v2 `app` leaf and writes its pid into each v1 instance directory's `cgroup.procs` (one
/// `cgroup PATH` record each); the relay, its child, is born in the `relay` leaf and stays in the
/// launcher's v1 directories. The limits are on the instance directory, which v1 charges for
/// its children (use_hierarchy is always on). Leaves in the other v1 hierarchies would separate
/// nothing a suspend needs, and cost two mkdirs and rmdirs each per launch; an instance an
/// older appd made with leaves everywhere is still adopted (`open` finds the leaves it has).
struct HybridCgroups: CgroupDriver {
    /// One hierarchy appd uses and the parent directory in it.
    struct Place: Sendable {
        var controllers: [String]
        var parent: String
    }

    let layout: CgroupLayout
    let settings: CgroupSettings
    let v1: [Place]
    let unified: Place?

    init(layout: CgroupLayout, settings: CgroupSettings) throws {
        self.layout = layout
        self.settings = settings
        func place(_ hierarchy: CgroupLayout.Hierarchy) throws -> Place {
            let path = try Cgroups.parentPath(settings: settings, own: hierarchy.ownCgroup)
            guard let directory = hierarchy.directory(of: path) else {
                throw AppdError(
                    .unsupported,
                    "cgroup \(path) is not visible through the mount at \(hierarchy.mountPoint)")
            }
            return Place(controllers: hierarchy.controllers, parent: directory)
        }
        // cpuacct and blkio carry no limit, only what the engines read as the container's
        // stats (containerd's CPU usage, io): where a host mounts them as hierarchies of their
        // own (cpuacct apart from cpu here), an instance without a directory there would be
        // charged to the hierarchy's root, and its stats would be the host's. Made where visible.
        var wanted = ["memory", "pids", "cpu", "cpuacct", "blkio", "cpuset"]
        if layout.unified == nil { wanted.append("freezer") }
        var places: [Place] = []
        for controller in wanted {
            guard let hierarchy = layout.v1Hierarchy(for: controller),
                !places.contains(where: { $0.controllers == hierarchy.controllers })
            else { continue }
            if controller == "cpuacct" || controller == "blkio" {
                // Only where a directory can be made: systemd-nspawn mounts the v1 hierarchies
                // it does not delegate read-only, and a stats-only one must not stop a launch.
                if let place = try? place(hierarchy), Self.canMakeDirectories(at: place.parent) {
                    places.append(place)
                }
                continue
            }
            if controller == "cpuset" {
                // Optional: an instance that asks no cpuset never touches it.
                if let cpuset = try? place(hierarchy) { places.append(cpuset) }
                continue
            }
            places.append(try place(hierarchy))
        }
        v1 = places
        unified = try layout.unified.map(place)
    }

    /// The parents `prepare` makes: every hierarchy's but the cpuset one's, made by the first
    /// `create` that asks a cpuset.
    var parentDirectories: [String] {
        v1.filter { !$0.controllers.contains("cpuset") }.map(\.parent)
            + (unified.map { [$0.parent] } ?? [])
    }

    /// v1 charges a child to its ancestors too (use_hierarchy is always on since Linux 5.x).
    func appsMemory() throws -> Int64? {
        guard let place = v1.first(where: { $0.controllers.contains("memory") }) else { return nil }
        return try CgroupDirectory(place.parent).number("memory.usage_in_bytes")
    }

    /// Creates the parent in every hierarchy; v1 needs nothing enabled (the cpuset levels get
    /// their CPUs at `create`, which fills every empty level above the instance).
    func prepare() throws {
        for parent in parentDirectories { try Self.makeDirectories(parent) }
    }

    /// Whether the mount holding `path` (its deepest existing level) is writable.
    private static func canMakeDirectories(at path: String) -> Bool {
        var existing = path
        while !CgroupFS.isDirectory(existing), let slash = existing.lastIndex(of: "/"),
            slash != existing.startIndex
        {
            existing = String(existing[..<slash])
        }
        var info = statvfs()
        guard statvfs(existing, &info) == 0 else { return false }
        return info.f_flag & UInt(ST_RDONLY) == 0
    }

    /// `path` and every missing level above it.
    private static func makeDirectories(_ path: String) throws {
        guard !CgroupFS.isDirectory(path) else { return }
        var made = ""
        for component in path.split(separator: "/") {
            made += "/" + component
            if !CgroupFS.isDirectory(made) {
                try CgroupDirectory(made).make(existingIsFine: true)
            }
        }
    }

    /// The interface file, value and controller for each limit.
    static func limitFiles(_ limits: CgroupLimits)
        -> [(controller: String, file: String, value: String)]
    {
        var files: [(controller: String, file: String, value: String)] = []
        if let memory = limits.memoryMax {
            files.append(("memory", "memory.limit_in_bytes", String(memory)))
        }
        if let pids = limits.pidsMax { files.append(("pids", "pids.max", String(pids))) }
        if let shares = limits.cpuShares {
            files.append(("cpu", "cpu.shares", String(shares)))
        } else if let weight = limits.cpuWeight {
            // v2's default weight 100 is v1's default 1024 shares; v1 accepts 2 or more.
            files.append(("cpu", "cpu.shares", String(max(2, weight * 1024 / 100))))
        }
        // The period before the quota (`write` retries the other way round).
        if let period = limits.cpuPeriod {
            files.append(("cpu", "cpu.cfs_period_us", String(period)))
        }
        if let quota = limits.cpuQuota { files.append(("cpu", "cpu.cfs_quota_us", String(quota))) }
        if let cpus = limits.cpusetCPUs { files.append(("cpuset", "cpuset.cpus", cpus)) }
        if let mems = limits.cpusetMems { files.append(("cpuset", "cpuset.mems", mems)) }
        return files
    }

    func create(instance: String, app: String, limits: CgroupLimits?) throws
        -> any InstanceCgroup
    {
        let limits = try checkedRequest(instance: instance, app: app, limits: limits)
        for (controller, _, _) in Self.limitFiles(limits)
        where !v1.contains(where: { $0.controllers.contains(controller) }) {
            throw AppdError(
                .unsupported,
                "cannot limit \(controller): no cgroup v1 hierarchy carries that controller",
                hint: controller == "memory"
                    ? "build the kernel with CONFIG_MEMCG=y and mount it (cgroup -o memory)"
                    : controller == "pids"
                        ? "build the kernel with CONFIG_CGROUP_PIDS=y and mount it"
                        : controller == "cpuset"
                            ? "build the kernel with CONFIG_CPUSETS=y and mount it"
                            : "build the kernel with CONFIG_CGROUP_SCHED=y and mount it")
        }
        var cgroup = instanceCgroup(instance: instance, app: app)
        if limits.cpusetCPUs == nil && limits.cpusetMems == nil {
            cgroup.v1.removeAll { $0.controllers.contains("cpuset") }
        }
        var made: [CgroupDirectory] = []
        do {
            for directory in cgroup.allDirectories {
                let above = CgroupDirectory(parentDirectory(of: directory.path))
                let parent = app.isEmpty ? above.path : parentDirectory(of: above.path)
                if !CgroupFS.isDirectory(parent) {
                    if cgroup.isCpuset(directory) {
                        try Self.makeDirectories(parent)
                    } else {
                        try prepare()
                    }
                }
                if !app.isEmpty { try above.make(existingIsFine: true) }
                try directory.make(existingIsFine: false)
                made.append(directory)
                if cgroup.isCpuset(directory) { try directory.fillCpuset() }
            }
            // The limits before the leaves: a cpuset leaf copies the instance's narrowed set.
            try Self.write(
                Self.limitFiles(limits), directory: { cgroup.member($0) }, leaves: { _ in [] })
            for leaf in cgroup.leaves {
                try leaf.make(existingIsFine: false)
                if cgroup.isCpuset(leaf) { try leaf.fillCpuset() }
            }
        } catch {
            for directory in made { try? directory.remove(leaves: cgroup.leaves(of: directory)) }
            for appDirectory in cgroup.appDirectories { appDirectory.removeIfUnused() }
            throw error
        }
        return cgroup
    }

    /// An instance made before appd used a hierarchy (cpuset) has no directory there: it is
    /// opened without it.
    func open(instance: String, app: String) throws -> (any InstanceCgroup)? {
        if !app.isEmpty { try Cgroups.validateName(app, "app id") }
        try Cgroups.validateName(instance, "instance name")
        var cgroup = instanceCgroup(instance: instance, app: app)
        cgroup.v1.removeAll { !CgroupFS.isDirectory($0.directory.path) }
        guard cgroup.allDirectories.contains(where: { CgroupFS.isDirectory($0.path) }) else {
            return nil
        }
        cgroup.leafed = Set(
            cgroup.allDirectories.filter { CgroupFS.isDirectory($0.leaf(Cgroups.appLeaf).path) }
                .map(\.path))
        return cgroup
    }

    private func instanceCgroup(instance: String, app: String) -> HybridInstanceCgroup {
        func directory(_ parent: String) -> CgroupDirectory {
            CgroupDirectory(parent + (app.isEmpty ? "" : "/" + app) + "/" + instance)
        }
        let members = v1.map {
            HybridInstanceCgroup.Member(
                controllers: $0.controllers, directory: directory($0.parent))
        }
        // The leaves go where a suspend freezes: the v2 tree, else the v1 freezer.
        let frozen =
            unified.map { directory($0.parent) }
            ?? members.first { $0.controllers.contains("freezer") }?.directory
        return HybridInstanceCgroup(
            app: app, instance: instance, v1: members,
            unified: unified.map { directory($0.parent) },
            leafed: settings.instanceLeaves ? Set(frozen.map { [$0.path] } ?? []) : [])
    }
}

struct HybridInstanceCgroup: InstanceCgroup {
    struct Member: Sendable {
        var controllers: [String]
        var directory: CgroupDirectory
    }

    let app: String
    let instance: String
    var v1: [Member]
    let unified: CgroupDirectory?
    /// The directories (paths) with `app` and `relay` leaves: the frozen hierarchy's; none for
    /// appd-oci's instances or one an older appd made without leaves; every hierarchy's for one
    /// an appd made before only the frozen one had them (adopted).
    var leafed: Set<String>

    var allDirectories: [CgroupDirectory] { v1.map(\.directory) + (unified.map { [$0] } ?? []) }
    /// The per-app level in each hierarchy; none without an app id (the instance is then
    /// right below the parent, which is never removed).
    var appDirectories: [CgroupDirectory] {
        app.isEmpty ? [] : allDirectories.map { CgroupDirectory(parentDirectory(of: $0.path)) }
    }
    var directories: [String] { allDirectories.map(\.path) }
    var procsFiles: [String] { allDirectories.map { frozenPart(of: $0).file("cgroup.procs") } }
    var birthDirectory: String? { unified.map { frozenPart(of: $0).path } }
    var relayProcsFiles: [String] {
        allDirectories.filter { leafed.contains($0.path) }.map {
            $0.leaf(Cgroups.relayLeaf).file("cgroup.procs")
        }
    }
    /// Every leaf in every hierarchy.
    var leaves: [CgroupDirectory] { allDirectories.flatMap(leaves(of:)) }
    func leaves(of directory: CgroupDirectory) -> [CgroupDirectory] {
        leafed.contains(directory.path)
            ? [directory.leaf(Cgroups.appLeaf), directory.leaf(Cgroups.relayLeaf)] : []
    }
    /// Where the launcher and the app are in `directory`'s hierarchy (and what a suspend freezes
    /// in the frozen one): the `app` leaf, or the instance directory without leaves.
    private func frozenPart(of directory: CgroupDirectory) -> CgroupDirectory {
        leafed.contains(directory.path) ? directory.leaf(Cgroups.appLeaf) : directory
    }

    func member(_ controller: String) -> CgroupDirectory? {
        v1.first { $0.controllers.contains(controller) }?.directory
    }

    /// Whether `directory` (an instance directory or leaf) lies in the cpuset hierarchy.
    func isCpuset(_ directory: CgroupDirectory) -> Bool {
        guard let cpuset = member("cpuset") else { return false }
        return directory == cpuset || directory.path.hasPrefix(cpuset.path + "/")
    }

    /// Every pid in any of the directories and leaves: a process could have been moved out of
    /// one.
    func processes() throws -> [pid_t] {
        var pids = Set<pid_t>()
        for directory in allDirectories {
            pids.formUnion(try directory.processes(leaves: leaves(of: directory)))
        }
        return pids.sorted()
    }

    func freeze(timeoutSeconds: Double) throws {
        if let unified, unified.hasFreeze {
            try frozenPart(of: unified).setFrozen(true, timeoutSeconds: timeoutSeconds)
        } else if let freezer = member("freezer") {
            try setV1Freezer(frozenPart(of: freezer), "FROZEN", timeoutSeconds: timeoutSeconds)
        } else {
            throw AppdError(
                .unsupported, "\(self) cannot be frozen",
                hint: "freezing needs cgroup v2's cgroup.freeze (Linux 5.2) or the v1 freezer "
                    + "(CONFIG_CGROUP_FREEZER=y)")
        }
    }

    func thaw() throws {
        if let unified, unified.hasFreeze {
            try frozenPart(of: unified).setFrozen(false, timeoutSeconds: 5)
        } else if let freezer = member("freezer") {
            try setV1Freezer(frozenPart(of: freezer), "THAWED", timeoutSeconds: 5)
        }
    }

    /// v1 refuses (EBUSY) a memory limit below what it cannot reclaim; the old one stays.
    /// A limit whose hierarchy this instance has no directory in (made before appd used
    /// cpuset) is refused.
    func setLimits(_ limits: CgroupLimits) throws {
        try limits.validate()
        let files = HybridCgroups.limitFiles(limits)
        for (controller, _, _) in files where member(controller) == nil {
            throw AppdError(
                .unsupported,
                "\(self) has no \(controller) cgroup to limit (made by an appd without it)")
        }
        try HybridCgroups.write(files, directory: member, leaves: leaves(of:))
    }

    func isFrozen() throws -> Bool {
        if let unified, unified.hasFreeze { return try frozenPart(of: unified).isFrozen() }
        if let freezer = member("freezer") {
            return try frozenPart(of: freezer).read("freezer.state").hasPrefix("FROZEN")
        }
        return false
    }

    /// v1 freezer: FREEZING until every task stopped, then FROZEN.
    private func setV1Freezer(_ freezer: CgroupDirectory, _ state: String, timeoutSeconds: Double)
        throws
    {
        try freezer.write(state, "freezer.state")
        let deadline = Deadline(seconds: timeoutSeconds)
        while !(try freezer.read("freezer.state").hasPrefix(state)) {
            guard !deadline.passed else {
                // A freeze that does not complete (seen on 6.18 with a fork loop under load:
                // FREEZING for good) must not leave the instance half frozen: back to THAWED.
                if state == "FROZEN" { try? freezer.write("THAWED", "freezer.state") }
                throw AppdError(
                    .io,
                    "timed out after \(timeoutSeconds)s setting "
                        + "\(freezer.file("freezer.state")) to \(state)")
            }
            usleep(1000)
        }
    }

    func kill(timeoutSeconds: Double) throws {
        // cgroup.kill in the v2 tree reaches every process the launcher placed, since it joins
        // all hierarchies; the SIGKILL loop covers kernels before 5.14 and v1-only hosts.
        let allProcsFiles = (allDirectories + leaves).map { $0.file("cgroup.procs") }
        if let unified, unified.hasKill {
            try unified.killAll(procsFiles: allProcsFiles, timeoutSeconds: timeoutSeconds)
            return
        }
        guard let freezer = member("freezer") else {
            guard let killer = unified ?? allDirectories.first else { return }
            try killer.killAll(procsFiles: allProcsFiles, timeoutSeconds: timeoutSeconds)
            return
        }
        // v1 freezer: freeze so nothing forks while we signal, SIGKILL every pid, thaw so the
        // signals are delivered (a task frozen by v1 does not die until thawed); repeat. A
        // suspended app's leaf stays frozen when its parent thaws (v1 self_freezing): it is
        // thawed first.
        if leafed.contains(freezer.path) {
            try setV1Freezer(frozenPart(of: freezer), "THAWED", timeoutSeconds: timeoutSeconds)
        }
        let deadline = Deadline(seconds: timeoutSeconds)
        while true {
            let pids = try processes()
            if pids.isEmpty { return }
            guard !deadline.passed else {
                throw AppdError(
                    .io,
                    "timed out after \(timeoutSeconds)s killing \(self): "
                        + "pids \(pids.map(String.init).joined(separator: " ")) remain")
            }
            // Frozen, nothing forks while we signal; a freeze that does not complete in time is
            // no reason to stop killing (SIGKILL reaches what is not frozen, the loop repeats).
            try? setV1Freezer(freezer, "FROZEN", timeoutSeconds: min(timeoutSeconds, 0.5))
            for pid in try processes() { _ = Glibc.kill(pid, SIGKILL) }
            try setV1Freezer(freezer, "THAWED", timeoutSeconds: timeoutSeconds)
            usleep(1000)
        }
    }

    func events() throws -> CgroupEvents {
        // v1 counts an OOM kill and a refused fork in the cgroup of the process concerned (a
        // leaf), not in the instance whose limit was hit: the leaves are added in. The limit's
        // own failcnt is the instance's.
        var events = CgroupEvents()
        if let memory = member("memory") {
            for directory in [memory] + leaves(of: memory) {
                events.oomKills += try directory.counters("memory.oom_control")["oom_kill"] ?? 0
            }
            events.memoryLimitHits = try memory.number("memory.failcnt") ?? 0
        }
        if let pids = member("pids") {
            for directory in [pids] + leaves(of: pids) {
                events.pidsLimitHits += try directory.counters("pids.events")["max"] ?? 0
            }
        }
        return events
    }

    func memory() throws -> CgroupMemory {
        guard let memory = member("memory"),
            let current = try memory.number("memory.usage_in_bytes")
        else {
            throw AppdError(
                .unsupported, "\(self) has no memory controller",
                hint: "build the kernel with CONFIG_MEMCG=y and mount the memory hierarchy")
        }
        return CgroupMemory(current: current, peak: try memory.number("memory.max_usage_in_bytes"))
    }

    /// The memory controller is v1's here: its limit lowered step by step (CgroupReclaim).
    func reclaimMemory(to target: Int64, timeoutSeconds: Double, stop: @Sendable () -> Bool)
        throws -> MemoryReclaim?
    {
        guard let memory = member("memory") else { return nil }
        return try CgroupReclaim.limitSteps(
            memory, target: target, timeoutSeconds: timeoutSeconds, stop: stop)
    }

    func cpuMicroseconds() throws -> Int64? {
        if let unified, let usage = try unified.counters("cpu.stat")["usage_usec"] { return usage }
        return try member("cpuacct")?.number("cpuacct.usage").map { $0 / 1000 }
    }

    /// Removes every directory even if one fails, then reports the first failure.
    func remove() throws {
        var failure: Error?
        for directory in allDirectories {
            do { try directory.remove(leaves: leaves(of: directory)) } catch {
                failure = failure ?? error
            }
        }
        for appDirectory in appDirectories { appDirectory.removeIfUnused() }
        if let failure { throw failure }
    }
}
