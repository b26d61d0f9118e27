import AppContainers
import AppdBase
import AppdConfig
import Foundation
import Glibc
import LifecycleProtocol
import Sandbox
import Synchronization

/// The sandbox end of a launch (Supervisor+Launch.swift runs the rest): what an app's instance
/// will run, then its launcher started in a cgroup of its own. The daemon's is `SandboxSpawner`
/// (appd-exec under seccomp, namespaces and cgroups); SupervisorTests' fake starts a plain
/// child process, so that the Supervisor's launch, lifecycle and exits are tested without root.
public protocol InstanceSpawner: Sendable {
    /// What `plan` settles for `start`: the sandbox profile and its filter, for the daemon.
    associatedtype Plan: Sendable

    /// Compiles what the instance runs under (the catalog has checked the bundle). A throw is
    /// appd's refusal of the launch (the caller records it as a denial).
    func plan(_ app: InstalledApp, arguments: [String], logDenials: Bool) throws -> Plan

    /// Starts the launcher of instance `instance` of `app` in a new cgroup. The files stay the
    /// caller's (it closes them once this returns). On failure nothing is left (no cgroup).
    func start(_ plan: Plan, app: InstalledApp, instance: String, files: LaunchFiles) throws
        -> SandboxLaunch.Started

    /// `[Sandbox] Launcher=` after a reload: later launches use it (a throw: it does not exist).
    func apply(_ configuration: AppdConfiguration) throws

    /// The app is being uninstalled or restored: nothing of its containers may stay held.
    func forget(app: AppID)

    /// An instance has ended: what no instance holds any more can go.
    func instanceEnded()
}

/// The descriptors a launch hands its launcher: its output pipe and relay, its status file, its
/// end of the lifecycle channel (docs/app-output.md, docs/lifecycle.md).
public struct LaunchFiles: Sendable {
    /// The app's log folder, the instance's log file name in it, and its size limit.
    public var logFolder: Int32
    public var logName: String
    public var logMaxBytes: Int64
    /// journald's socket (connected) and the fields each line carries there.
    public var journal: Int32?
    public var journalFields: [String]
    /// The file the launcher writes the app's fate to.
    public var status: Int32
    /// The app's end of the lifecycle channel (fd 3 in the app).
    public var channel: Int32
}

/// The daemon's spawner: appd-exec in the sandbox the app's entitlements and appd.conf make
/// (AppStore+Sandbox), its seccomp filter compiled once per rule set, joining the app's shared
/// namespaces, spawned from the thread whose fd table holds no instance's fds.
public final class SandboxSpawner: InstanceSpawner {
    public struct Plan: Sendable {
        var profile: SandboxProfile
        var bpf: [UInt8]
    }

    let store: AppStore
    let driver: any CgroupDriver
    let kernel: KernelLayers
    private let launcher: Mutex<String>
    /// Compiled seccomp filters by rule set, shared by the launches running off the actor.
    let bpfCache = BPFCache()
    /// Each app's shared namespaces, joined by its launches (NamespaceTemplates.swift).
    public let templates = NamespaceTemplates()
    /// Spawns the launchers from a thread whose fd table holds none of the instances' fds
    /// (LauncherSpawner.swift); nil: from the launch's own thread.
    let spawner = LauncherSpawner.start()

    /// Finds the launcher `[Sandbox] Launcher=` names (or the one next to appd).
    public init(store: AppStore, driver: any CgroupDriver, configuration: AppdConfiguration) throws
    {
        self.store = store
        self.driver = driver
        kernel = KernelLayers.detect()
        launcher = Mutex(try SandboxLaunch.findLauncher(configured: configuration.sandbox.launcher))
    }

    public func plan(_ app: InstalledApp, arguments: [String], logDenials: Bool) throws -> Plan {
        var profile = try store.sandboxProfile(for: app, arguments: arguments, kernel: kernel)
        let bpf = profile.seccomp.required ? try bpfCache.filter(for: profile.seccomp) : []
        profile.environment.append(.init(name: LifecycleWire.environmentVariable, value: "3"))
        profile.logDenials = logDenials
        return Plan(profile: profile, bpf: bpf)
    }

    public func start(_ plan: Plan, app: InstalledApp, instance: String, files: LaunchFiles) throws
        -> SandboxLaunch.Started
    {
        let launcher = launcher.withLock { $0 }
        // The plan makes the output pipe (the relay's read end, the app's write end) and this
        // closes it once the launcher holds it; the rest of `files` is the caller's.
        var launch = try SandboxLaunch(
            profile: plan.profile, launcher: launcher, cgroups: driver.settings,
            output: .relay(
                LogDestination(
                    folder: files.logFolder, name: files.logName, maxBytes: files.logMaxBytes,
                    journal: files.journal, journalFields: files.journalFields)))
        defer { for fd in launch.handedOver { close(fd) } }
        launch.channel = files.channel
        launch.bpf = plan.bpf
        launch.spawner = spawner
        // The app's shared namespaces (built here by the first launch that finds none).
        launch.namespaces = templates.lease(for: plan.profile, launcher: launcher)
        defer { launch.namespaces?.close() }
        return try launch.start(
            instance: instance, driver: driver, statusFD: files.status, newSession: true)
    }

    public func apply(_ configuration: AppdConfiguration) throws {
        let found = try SandboxLaunch.findLauncher(configured: configuration.sandbox.launcher)
        launcher.withLock { $0 = found }
    }

    public func forget(app: AppID) { templates.forget(app: app) }

    public func instanceEnded() { templates.sweep() }
}

/// Compiled seccomp filters by rule set: every app with the same entitlements shares one, so
/// libseccomp runs once per rule set, not once per launch. Shared by launches running side by
/// side off the actor; at most 256 rule sets are kept (then it starts over).
final class BPFCache: Sendable {
    private let filters = Mutex<[SeccompRules: [UInt8]]>([:])

    func filter(for rules: SeccompRules) throws -> [UInt8] {
        if let cached = filters.withLock({ $0[rules] }) { return cached }
        // Compiled outside the lock: two launches may both compile a new rule set once.
        let compiled = try SeccompCompiler.bpf(for: rules)
        filters.withLock { filters in
            if filters.count >= 256 { filters.removeAll() }
            filters[rules] = compiled
        }
        return compiled
    }
}
