import AppContainers
import AppdAPI
import AppdBase
import AppdConfig
import CLinux
import Foundation
import Glibc
import Sandbox
import Synchronization
import Testing

@testable import AppContainers
@testable import Sandbox
@testable import Supervisor

/// The registry as the Supervisor sees it, in memory: a few installed apps, their Info.plist
/// keys, and what the Supervisor did to them (launches noted, tmp emptied).
final class FakeCatalog: AppCatalog {
    struct State {
        var apps: [String: InstalledApp] = [:]
        var info: [String: AppLaunchInfo] = [:]
        var refused: Set<String> = []
        var launches: [AppID: Date] = [:]
        /// The apps whose Caches were emptied, in order.
        var emptiedCaches: [String] = []
    }
    let state = Mutex(State())

    func add(_ id: String, uid: UInt32 = 60_001, info: AppLaunchInfo = AppLaunchInfo()) {
        let now = Date()
        let app = InstalledApp(
            bundleID: id, state: .installed, uid: uid, dataUUID: UUID().uuidString,
            bundleUUID: UUID().uuidString, bundleName: "\(id).app", title: id, version: "1",
            installedAt: now, updatedAt: now)
        state.withLock {
            $0.apps[id.lowercased()] = app
            $0.info[id.lowercased()] = info
        }
    }

    /// The launch-time check fails for `id` from now on (a tampered bundle).
    func refuse(_ id: String) { state.withLock { _ = $0.refused.insert(id.lowercased()) } }

    func app(_ id: String) throws -> InstalledApp {
        guard let app = state.withLock({ $0.apps[id.lowercased()] }) else {
            throw AppdError(.notFound, "\(id) is not installed")
        }
        return app
    }

    func apps() throws -> [InstalledApp] { state.withLock { Array($0.apps.values) } }

    func checkInstalledBundle(_ app: InstalledApp) throws {
        if state.withLock({ $0.refused.contains(app.bundleID.lowercased()) }) {
            throw AppdError(.invalidBundle, "\(app.bundleID): the bundle changed since its install")
        }
    }

    func launchInfo(of app: InstalledApp) -> AppLaunchInfo {
        state.withLock { $0.info[app.bundleID.lowercased()] } ?? AppLaunchInfo()
    }

    func temporaryDirectoryHasEntries(of app: InstalledApp) throws -> Bool { false }
    func emptyTemporaryDirectory(of app: InstalledApp) throws -> Int { 0 }
    func emptyCaches(of app: InstalledApp) throws -> AppStore.CachesReclaimed {
        state.withLock { $0.emptiedCaches.append(app.bundleID) }
        return AppStore.CachesReclaimed(bundleID: app.bundleID, bytes: 4096, entries: 1)
    }
    func recordLaunch(of bundleID: String, at time: Date) throws {
        state.withLock { $0.launches[AppID(bundleID)] = time }
    }
    func lastLaunches() throws -> [AppID: Date] { state.withLock { $0.launches } }
    func freeSpace() -> FreeSpace? { nil }
}

/// An instance cgroup that only records what was asked of it; its "processes" are the one
/// child the fake spawner started, which `kill` ends with SIGKILL through its pidfd (never by
/// pid: once reaped, the pid may be another test's process).
final class FakeCgroup: InstanceCgroup {
    let app: String
    let instance: String
    let child: Mutex<FakeChild?> = Mutex(nil)
    /// "freeze", "thaw", "kill", "remove", "limits", in order.
    let calls = Mutex<[String]>([])
    let memoryBytes = Mutex<Int64>(0)

    init(app: String, instance: String) {
        self.app = app
        self.instance = instance
    }

    var directories: [String] { ["/fake/apps/\(app)/\(instance)"] }
    var procsFiles: [String] { [] }
    var birthDirectory: String? { nil }
    var relayProcsFiles: [String] { [] }
    var log: [String] { calls.withLock { $0 } }

    func processes() throws -> [pid_t] { child.withLock { $0.map { [$0.pid] } ?? [] } }
    /// What `freeze` throws, if anything (a cgroup the kernel would not freeze).
    let freezeFailure = Mutex<AppdError?>(nil)
    func freeze(timeoutSeconds: Double) throws {
        if let failure = freezeFailure.withLock({ $0 }) { throw failure }
        calls.withLock { $0.append("freeze") }
    }
    func thaw() throws { calls.withLock { $0.append("thaw") } }
    func isFrozen() throws -> Bool { calls.withLock { $0.last == "freeze" } }
    func kill(timeoutSeconds: Double) throws {
        calls.withLock { $0.append("kill") }
        child.withLock { $0 }?.kill()
    }
    func events() throws -> CgroupEvents { CgroupEvents() }
    func memory() throws -> CgroupMemory {
        CgroupMemory(current: memoryBytes.withLock { $0 }, peak: nil)
    }
    func setLimits(_ limits: CgroupLimits) throws { calls.withLock { $0.append("limits") } }
    func cpuMicroseconds() throws -> Int64? { 0 }
    func remove() throws { calls.withLock { $0.append("remove") } }
    /// How a reclaim goes: `reclaimable` bytes of `memoryBytes` can be given back (none by
    /// default, as on a host without swap for an app of anonymous memory); with
    /// `reclaimHangs` it blocks (as a write to memory.reclaim with slow swap does) until it is
    /// told to stop or its time is up; with `reclaimFailure` it throws.
    let reclaimable = Mutex<Int64>(0)
    /// Reclaims asked for (not in `calls`: they run off the actor, after the freeze).
    let reclaims = Mutex(0)
    let reclaimHangs = Mutex(false)
    let reclaimFailure = Mutex<AppdError?>(nil)
    /// Whether a reclaim saw its stop (the instance was thawed while it ran).
    let reclaimStopped = Mutex(false)
    /// A hanging reclaim is blocked in the kernel, as it were, right now.
    let reclaimRunning = Mutex(false)
    func reclaimMemory(to target: Int64, timeoutSeconds: Double, stop: @Sendable () -> Bool)
        throws -> MemoryReclaim?
    {
        reclaims.withLock { $0 += 1 }
        if let failure = reclaimFailure.withLock({ $0 }) { throw failure }
        let before = memoryBytes.withLock { $0 }
        if reclaimHangs.withLock({ $0 }) {
            // Until stopped (at most 60 s, not its own bound: a loaded run must not make the
            // bound pass before the test thaws it).
            reclaimRunning.withLock { $0 = true }
            let end = Date().addingTimeInterval(60)
            while !stop() && Date() < end { usleep(1000) }
            reclaimStopped.withLock { $0 = stop() }
            reclaimRunning.withLock { $0 = false }
            return MemoryReclaim(
                method: .reclaim, target: target, before: before, after: before,
                seconds: timeoutSeconds, stopped: stop() ? "thawed" : "time bound passed")
        }
        let after = max(target, before - reclaimable.withLock { $0 })
        memoryBytes.withLock { $0 = after }
        return MemoryReclaim(
            method: .reclaim, target: target, before: before, after: after, seconds: 0.001,
            stopped: after > target ? "the kernel found no more to reclaim" : nil)
    }
}

/// Hands out fake cgroups and finds them again (adoption opens an instance's cgroup).
final class FakeCgroupDriver: CgroupDriver {
    let cgroups = Mutex<[String: FakeCgroup]>([:])
    let layout = CgroupLayout(mode: .none, unified: nil, v1: [])
    let settings = CgroupSettings()
    var parentDirectories: [String] { [] }

    func prepare() throws {}
    func create(instance: String, app: String, limits: CgroupLimits?) throws -> any InstanceCgroup {
        let cgroup = FakeCgroup(app: app, instance: instance)
        cgroups.withLock { $0[instance] = cgroup }
        return cgroup
    }
    func open(instance: String, app: String) throws -> (any InstanceCgroup)? {
        cgroups.withLock { $0[instance] }
    }
    func appsMemory() throws -> Int64? {
        cgroups.withLock { $0.values.reduce(0) { $0 + $1.memoryBytes.withLock { $0 } } }
    }
    subscript(_ instance: String) -> FakeCgroup? { cgroups.withLock { $0[instance] } }
}

/// Starts each instance as a plain child process (`sleep`) in a fake cgroup, and records the
/// launches it was asked for: the Supervisor watches, signals and reaps it as it would
/// appd-exec.
final class FakeSpawner: InstanceSpawner {
    struct Plan: Sendable {
        var app: String
        var arguments: [String]
    }
    struct Started: Sendable {
        var app: String
        var instance: String
        var pid: pid_t
        var arguments: [String]
        var child: FakeChild
        /// The app's end of the lifecycle channel (fd 3 in a real app), for a test to play
        /// the app on (FakeApp).
        var channel: FakeApp
    }

    let driver: FakeCgroupDriver
    let started = Mutex<[Started]>([])
    let forgotten = Mutex<[String]>([])
    /// The program each instance runs (argv): `sleep` by default.
    let program = Mutex(["/bin/sleep", "600"])

    init(driver: FakeCgroupDriver) { self.driver = driver }

    func plan(_ app: InstalledApp, arguments: [String], logDenials: Bool) throws -> Plan {
        Plan(app: app.bundleID, arguments: arguments)
    }

    func start(_ plan: Plan, app: InstalledApp, instance: String, files: LaunchFiles) throws
        -> SandboxLaunch.Started
    {
        let cgroup = try driver.create(instance: instance, app: plan.app, limits: nil)
        let pid = try Self.spawn(program.withLock { $0 })
        let child = FakeChild(pid: pid)
        (cgroup as? FakeCgroup)?.child.withLock { $0 = child }
        started.withLock {
            $0.append(
                Started(
                    app: plan.app, instance: instance, pid: pid, arguments: plan.arguments,
                    child: child, channel: FakeApp(fd: fcntl(files.channel, F_DUPFD_CLOEXEC, 3))))
        }
        return SandboxLaunch.Started(pid: pid, cgroup: cgroup)
    }

    func apply(_ configuration: AppdConfiguration) throws {}
    func forget(app: AppID) { forgotten.withLock { $0.append(app.spelling) } }
    func instanceEnded() {}

    var launches: [Started] { started.withLock { $0 } }

    /// A child of this process (so the Supervisor reaps it as it reaps its launchers).
    static func spawn(_ argv: [String]) throws -> pid_t {
        var pid: pid_t = 0
        var cArgs = argv.map { strdup($0) } + [nil]
        defer { for arg in cArgs { free(arg) } }
        // As appd-exec's app: default dispositions and no blocked signal, whatever this
        // process (the test runner) ignores or blocks; SIGTERM must end it.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        var all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let result = posix_spawn(&pid, argv[0], nil, &attributes, &cArgs, environ)
        guard result == 0 else { throw AppdError(.internal, "posix_spawn: \(result)") }
        return pid
    }
}

/// A child the fake spawner started, held by a pidfd taken at once (it cannot have been reaped
/// yet: only the Supervisor reaps it, after it ends). Signals and the last reap go through the
/// pidfd: the test process runs many suites side by side, and on a host with pid_max 32768 a
/// reaped child's pid is soon another test's child; `kill(pid)` and `waitpid(pid)` once reaped
/// and blocked one Supervisor's actor on another test's long-lived process.
final class FakeChild: Sendable {
    let pid: pid_t
    let pidfd: Int32

    init(pid: pid_t) {
        self.pid = pid
        pidfd = appd_pidfd_open(pid, 0)
    }

    func kill() { _ = appd_pidfd_kill(pidfd, SIGKILL) }

    /// Kills it and reaps it unless the Supervisor has (at most 10 s).
    func end() {
        kill()
        _ = reap()
    }

    /// `appd_pidfd_reap`'s answer once it is not 0 (still running), polled for at most
    /// `seconds`, and the status it gave.
    func reap(within seconds: Double = 10) -> (result: Int32, status: Int32) {
        var status: Int32 = -1
        let deadline = Date().addingTimeInterval(seconds)
        repeat {
            let result = appd_pidfd_reap(pidfd, &status)
            if result != 0 { return (result, status) }
            usleep(10_000)
        } while Date() < deadline
        return (0, status)
    }

    deinit { if pidfd >= 0 { close(pidfd) } }
}

/// The app's side of a lifecycle channel: what AppRuntime sends and reads, one JSON message
/// per SOCK_SEQPACKET datagram (docs/lifecycle.md).
final class FakeApp: Sendable {
    let fd: Int32

    init(fd: Int32) { self.fd = fd }

    /// Sends `message` (a JSON object) as the app would.
    @discardableResult
    func send(_ message: [String: Any]) -> Bool {
        guard let data = try? JSONSerialization.data(withJSONObject: message) else { return false }
        return data.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) } == data.count
    }

    /// The next message from the daemon, or nil after `seconds` (or at the channel's end).
    /// Blocks its thread: tests (async) call `waitMessage`, which runs it off the cooperative
    /// pool the Supervisor's actor needs.
    private func next(within seconds: Double = 60) -> [String: Any]? {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, Int32(seconds * 1000)) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let count = recv(fd, &buffer, buffer.count, 0)
        guard count > 0 else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(buffer[..<count])))
            as? [String: Any]
    }

    /// The types of the next messages until `type` (included), or all it read if it never came.
    private func types(until type: String, within seconds: Double = 60) -> [String] {
        var types: [String] = []
        let deadline = Date().addingTimeInterval(seconds)
        while let message = next(within: max(0.01, deadline.timeIntervalSinceNow)),
            let name = message["type"] as? String
        {
            types.append(name)
            if name == type { break }
        }
        return types
    }

    deinit { if fd >= 0 { close(fd) } }
}

/// A Supervisor on fakes, its records and logs in a temporary folder.
struct FakeDaemon {
    let catalog = FakeCatalog()
    let driver: FakeCgroupDriver
    let spawner: FakeSpawner
    let configuration: LiveConfiguration
    let folder: String
    let supervisor: Supervisor

    init(
        config text: String = "", folder existing: String? = nil,
        driver: FakeCgroupDriver = FakeCgroupDriver()
    ) throws {
        self.driver = driver
        spawner = FakeSpawner(driver: driver)
        configuration = LiveConfiguration(try AppdConfiguration.parse(text, file: "appd.conf"))
        if let existing {
            folder = existing
        } else {
            folder = NSTemporaryDirectory() + "appd-supervisor-test.\(UUID().uuidString)"
            try FileManager.default.createDirectory(
                atPath: folder, withIntermediateDirectories: true)
        }
        supervisor = try Supervisor(
            catalog: catalog, spawner: spawner, driver: driver, configuration: configuration,
            runtimeDirectory: "\(folder)/run", stateRoot: folder)
    }

    /// Stops watching, ends every child still running, removes the folder.
    func finish(removing: Bool = true) async {
        await supervisor.shutdown()
        for launch in spawner.launches { launch.child.end() }
        if removing { try? FileManager.default.removeItem(atPath: folder) }
    }
}

/// Polls `condition` until it holds or `seconds` pass (exits and timers arrive on their own).
/// 60 s by default: a holding condition returns at once, and a full CI run stalled these tests
/// for tens of seconds (one took 148 s).
func soon(
    _ seconds: Double = 60, _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try await condition() { return true }
        try? await Task.sleep(nanoseconds: 20_000_000)
    }
    return try await condition()
}

/// The instance once it has exited, or as it is after `seconds` (a test that expected an exit
/// then fails on its state instead of waiting for good).
func exited(_ supervisor: Supervisor, _ id: String, within seconds: Double = 60) async throws
    -> APIInstance
{
    await supervisor.waitForExit(id, atMost: .seconds(seconds))
    return try await supervisor.instance(id)
}

extension FakeApp {
    /// `next`, off Swift's cooperative pool: its poll blocks a thread for up to `seconds`, and
    /// the supervisor's actor (and every other suite running meanwhile) needs the pool's few.
    func waitMessage(within seconds: Double = 60) async -> [String: Any]? {
        let data: Data? = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    returning: self.next(within: seconds).flatMap {
                        try? JSONSerialization.data(withJSONObject: $0)
                    })
            }
        }
        return data.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
    }

    /// `types(until:)`, off the cooperative pool.
    func waitTypes(until type: String, within seconds: Double = 60) async -> [String] {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: self.types(until: type, within: seconds))
            }
        }
    }
}
