import AppdBase
import CLinux
import Foundation
import Glibc
import LauncherProtocol

/// How an instance ended.
public enum AppExitStatus: Sendable, Equatable, Codable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)
    /// The sandbox could not be built; the app never ran.
    case failedToLaunch(String)

    /// What a shell would report: the code, 128+signal, or 127 for a launch failure.
    public var shellCode: Int32 {
        switch self {
        case .exited(let code): code
        case .signaled(let signal): 128 + signal
        case .failedToLaunch: 127
        }
    }

    public var description: String {
        switch self {
        case .exited(let code): "exited with code \(code)"
        case .signaled(let signal):
            "killed by signal \(signal) (\(String(cString: strsignal(signal))))"
        case .failedToLaunch(let message): "failed to launch: \(message)"
        }
    }
}

/// Starts one sandboxed instance with `appd-exec`: `run` waits for it (the direct path of
/// `appd run`), `start` returns once it is in its cgroup (the daemon's Supervisor). Everything
/// comes in as a value (the profile, the launcher's path, the cgroup settings and limits, the
/// fds): no state root, no daemon, so any front door can launch with it.
///
/// The order matters: the instance cgroup exists before the launcher starts (the launcher joins
/// it first thing, so every process of the app is in it); the profile and the BPF travel on
/// memfds, never through the filesystem; posix_spawn (vfork + exec in glibc) runs no Swift
/// code between fork and exec; afterwards the cgroup is killed and removed, so nothing the app
/// left running survives it.
public struct SandboxLaunch {
    public var profile: SandboxProfile
    public var launcher: String
    public var cgroups: CgroupSettings
    public var limits: CgroupLimits
    /// Where the app's stdout and stderr go; nil = this process's own.
    public var output: Int32?
    /// Keep this process's stdin for the app (a console); otherwise it reads /dev/null.
    public var keepStdin: Bool
    /// The app's stdin instead (a terminal for a console); overrides keepStdin.
    public var input: Int32?
    /// The profile's seccomp filter compiled already (the daemon caches it per rule set);
    /// nil compiles it here.
    public var bpf: [UInt8]?
    /// The app's end of the lifecycle channel (docs/lifecycle.md): fd 3 in the app.
    public var channel: Int32?
    /// The output relay's fds and settings (docs/app-output.md): `output` is then the pipe's
    /// write end and the launcher's relay writes the log. nil: `output` is used as it is.
    public var relay: OutputRelayArguments?
    /// The app's shared namespaces to join (the daemon's NamespaceTemplates); the caller closes
    /// them after the start. nil: the launcher builds its own.
    public var namespaces: SharedNamespaces?
    /// Spawns from a thread with a small fd table of its own (the daemon's); nil: posix_spawn
    /// from this thread.
    public var spawner: LauncherSpawner?
    /// appd-oci's created state: the pipe the app process says `ready` on once the sandbox
    /// is built, and the start gate (an `O_PATH` fd of the FIFO it then waits on). The caller
    /// closes both after the start.
    public var startGate: (ready: Int32, fifo: Int32)?
    /// `appd-oci exec`: a pidfd of a running sandbox's PID 1, whose namespaces the launcher
    /// enters instead of building its own (the caller closes it after the start).
    public var enter: Int32?
    /// PID 1's signal rule for the app (`--init-signals`): appd-oci's containers.
    public var initSignals = false

    /// What appd-exec's output relay gets: the pipe's read end, the log folder, the journal.
    public struct OutputRelayArguments {
        public var readFD: Int32
        public var logDirectoryFD: Int32
        public var logName: String
        public var logMaxBytes: Int64
        public var journalFD: Int32?
        /// `KEY=VALUE` fields of every journal entry.
        public var journalFields: [String]

        public init(
            readFD: Int32, logDirectoryFD: Int32, logName: String, logMaxBytes: Int64,
            journalFD: Int32? = nil,
            journalFields: [String] = []
        ) {
            self.readFD = readFD
            self.logDirectoryFD = logDirectoryFD
            self.logName = logName
            self.logMaxBytes = logMaxBytes
            self.journalFD = journalFD
            self.journalFields = journalFields
        }
    }

    public init(
        profile: SandboxProfile, launcher: String, cgroups: CgroupSettings, limits: CgroupLimits,
        output: Int32? = nil, keepStdin: Bool = false, input: Int32? = nil
    ) {
        self.input = input
        self.profile = profile
        self.launcher = launcher
        self.cgroups = cgroups
        self.limits = limits
        self.output = output
        self.keepStdin = keepStdin
    }

    /// `configured`, else `appd-exec` next to the running executable, else the installed one.
    public static func findLauncher(configured: String?) throws -> String {
        let running = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            .map {
                URL(fileURLWithPath: $0).deletingLastPathComponent().appendingPathComponent(
                    "appd-exec"
                ).path
            }
        let candidates =
            configured.map { [$0] }
            ?? ([running].compactMap { $0 } + ["/usr/libexec/appd/appd-exec"])
        for path in candidates where access(path, X_OK) == 0 { return path }
        throw AppdError(
            .notFound, "the launcher appd-exec is not at \(candidates.joined(separator: " or "))",
            hint: configured == nil
                ? "build it (swift build) or set Launcher= in [Sandbox]"
                : "fix Launcher= in [Sandbox]")
    }

    /// Starts the launcher and waits for it. With a `relay`, the fds it names and `output` are
    /// closed here once the launcher has them (also when the start fails): the caller hands
    /// them over.
    public func run(instance: String = Self.newInstanceID()) throws -> AppExitStatus {
        let driver = try Cgroups.driver(settings: cgroups)
        try driver.prepare()
        var statusPipe: [Int32] = [-1, -1]
        guard appd_pipe_cloexec(&statusPipe) == 0 else {
            throw AppdError.system("pipe for the launch status")
        }
        defer { close(statusPipe[0]) }
        let started: Started
        do {
            started = try start(instance: instance, driver: driver, statusFD: statusPipe[1])
        } catch {
            close(statusPipe[1])
            for fd in handedOver { close(fd) }
            throw error
        }
        close(statusPipe[1])
        // With a relay, the launcher holds what it needs now: the relay sees EOF only once no
        // one else holds the pipe's write end, so ours go (run takes them over).
        for fd in handedOver { close(fd) }
        defer {
            try? started.cgroup.kill()
            try? started.cgroup.remove()
        }
        let raw = Self.forwardingSignals(to: started.pid) { Self.wait(started.pid) }
        return Self.status(line: Self.readAll(statusPipe[0]), waitStatus: raw)
    }

    /// A launcher on its way: the pid of `appd-exec` and the instance's cgroup.
    public struct Started: Sendable {
        public var pid: pid_t
        public var cgroup: any InstanceCgroup
        /// The bind filter's counter of refused binds (a BPF map fd the caller owns), when the
        /// profile has the filter.
        public var bindCounter: Int32?
        /// The loopback guard's counter of refused connects (a BPF map fd the caller owns),
        /// when the profile has the guard.
        public var loopbackCounter: Int32? = nil

        public init(
            pid: pid_t, cgroup: any InstanceCgroup, bindCounter: Int32? = nil,
            loopbackCounter: Int32? = nil
        ) {
            self.pid = pid
            self.cgroup = cgroup
            self.bindCounter = bindCounter
            self.loopbackCounter = loopbackCounter
        }
    }

    /// Puts the launcher into its instance cgroup before the launch returns. The launcher joins
    /// it too, as its first step (the `cgroup` records), but a kill that came between the
    /// launch's answer and that step found the cgroup empty and left the instance running, in
    /// state terminating, for good (a client that kills at once: SystemdTests). Whichever write
    /// comes second is a no-op; a launcher already gone (ESRCH) is the exit watcher's business.
    static func place(_ pid: pid_t, in procsFiles: [String]) {
        let line = Array("\(pid)\n".utf8)
        for file in procsFiles {
            let fd = open(file, O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
        }
    }

    /// Creates the instance cgroup and spawns the launcher into it; returns once the launcher is
    /// in it (not waiting for the sandbox). The launcher writes the app's fate to `statusFD` (a
    /// pipe, or a file that outlives the caller, as the daemon uses). `newSession` puts the launcher in a session of its own, so
    /// a terminal's Ctrl-C for the daemon never reaches the apps. If anything fails the cgroup
    /// is removed again.
    public func start(
        instance: String, driver: any CgroupDriver, statusFD: Int32, newSession: Bool = false
    )
        throws -> Started
    {
        let cgroup = try driver.create(
            instance: instance, app: profile.app.bundleID, limits: limits)
        return try start(in: cgroup, statusFD: statusFD, newSession: newSession)
    }

    /// Spawns the launcher into `cgroup`, made by the caller (removed again if the start
    /// fails, unless `joining`: then it belongs to a running sandbox, whose filters are
    /// attached already, and an `appd-oci exec` only joins it).
    public func start(
        in cgroup: any InstanceCgroup, statusFD: Int32, newSession: Bool = false,
        joining: Bool = false
    ) throws -> Started {
        var profile = profile
        do {
            // Before anything runs in the cgroup: the app's first bind is already filtered.
            var bindCounter: Int32?
            var loopbackCounter: Int32?
            var spawned = false
            defer {
                if !spawned, let bindCounter { close(bindCounter) }
                if !spawned, let loopbackCounter { close(loopbackCounter) }
            }
            if profile.denyPortBinds && !joining {
                bindCounter = try Self.denyPortBinds(in: cgroup)
            }
            if let ports = profile.loopbackPorts, !joining {
                loopbackCounter = try Self.guardLoopback(in: cgroup, allowing: ports)
            }
            // Born in its v2 directory (clone3 CLONE_INTO_CGROUP), the launcher joins only the
            // v1 hierarchies itself: moving a process by cgroup.procs waits for an RCU grace
            // period (10-20 ms here) unless a move came just before it.
            var birth: Int32 = -1
            defer { if birth >= 0 { close(birth) } }
            profile.cgroupProcs = cgroup.procsFiles
            if let directory = cgroup.birthDirectory {
                birth = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                if birth >= 0 {
                    profile.cgroupProcs.removeAll { $0 == directory + "/cgroup.procs" }
                }
            }
            profile.relayCgroupProcs = cgroup.relayProcsFiles
            let bpf =
                try self.bpf
                ?? (profile.seccomp.required ? SeccompCompiler.bpf(for: profile.seccomp) : [])
            let profileFD = try Self.memfd("appd-profile", Array(profile.encoded().utf8))
            defer { close(profileFD) }
            let bpfFD = try Self.memfd("appd-seccomp", bpf)
            defer { close(bpfFD) }
            let pid = try spawn(
                profileFD: profileFD, bpfFD: bpfFD, statusFD: statusFD, newSession: newSession,
                cgroup: birth)
            spawned = true
            // Born in the v2 directory, the launcher is where a kill finds it (cgroup.kill, or
            // the v2 procs file a kill lists) from its first instruction.
            if birth < 0 { Self.place(pid, in: cgroup.procsFiles) }
            return Started(
                pid: pid, cgroup: cgroup, bindCounter: bindCounter, loopbackCounter: loopbackCounter
            )
        } catch {
            if !joining { try? cgroup.remove() }
            throw error
        }
    }

    /// What the launcher's status line (`exit N`, `signal N`, `error STEP: MESSAGE`) says;
    /// without one the launcher itself died, and its wait status is all there is.
    public static func status(line text: String, waitStatus raw: Int32?) -> AppExitStatus {
        if let parsed = parseStatus(text) { return parsed }
        guard let raw else { return .failedToLaunch("the launcher ended without a status") }
        return raw & 0x7F == 0 ? .exited((raw >> 8) & 0xFF) : .signaled(raw & 0x7F)
    }

    /// The first line of a status file (LauncherProtocol's `LauncherStatus`), or nil when the
    /// launcher wrote none.
    public static func parseStatus(_ text: String) -> AppExitStatus? {
        let line = text.split(separator: "\n").first ?? ""
        switch LauncherStatus(line: String(line)) {
        case .failed(let message)?: return .failedToLaunch(message)
        case .exited(let code)?: return .exited(code)
        case .signaled(let number)?: return .signaled(number)
        case nil: return nil
        }
    }

    public static func newInstanceID() -> String {
        String(UUID().uuidString.lowercased().prefix(8))
    }

    private func spawn(
        profileFD: Int32, bpfFD: Int32, statusFD: Int32, newSession: Bool, cgroup: Int32
    ) throws -> pid_t {
        var plan = SpawnPlan(path: launcher, arguments: [launcher], newSession: newSession)
        if cgroup >= 0 { plan.bear(inCgroup: cgroup) }
        if let input {
            plan.place(input, at: 0)
        } else if !keepStdin {
            plan.stdinFromDevNull = true
        }
        if let output {
            plan.place(output, at: 1)
            plan.place(output, at: 2)
        }
        plan.place(profileFD, at: 3)
        plan.place(bpfFD, at: 4)
        plan.place(statusFD, at: 5)
        plan.arguments += [
            LauncherFlag.profileFD, "3", LauncherFlag.seccompFD, "4", LauncherFlag.statusFD, "5",
        ]
        var next: Int32 = 6
        func place(_ fd: Int32, _ option: String) {
            plan.place(fd, at: next)
            plan.arguments += [option, String(next)]
            next += 1
        }
        if let channel { place(channel, LauncherFlag.channelFD) }
        if let relay {
            place(relay.readFD, LauncherFlag.outputFD)
            place(relay.logDirectoryFD, LauncherFlag.logDirectoryFD)
            if let journal = relay.journalFD { place(journal, LauncherFlag.journalFD) }
            plan.arguments += [
                LauncherFlag.logName, relay.logName, LauncherFlag.logMaxBytes,
                String(relay.logMaxBytes),
            ]
            for field in relay.journalFields {
                plan.arguments += [LauncherFlag.journalField, field]
            }
        }
        if let namespaces {
            if namespaces.mount >= 0 {
                place(namespaces.mount, LauncherFlag.mountNamespaceFD)
                place(namespaces.root, LauncherFlag.rootFD)
            }
            if namespaces.net >= 0 { place(namespaces.net, LauncherFlag.netNamespaceFD) }
            if namespaces.uts >= 0 { place(namespaces.uts, LauncherFlag.utsNamespaceFD) }
            if namespaces.ipc >= 0 { place(namespaces.ipc, LauncherFlag.ipcNamespaceFD) }
            if namespaces.pid >= 0 { place(namespaces.pid, LauncherFlag.pidNamespaceFD) }
        }
        if let startGate {
            place(startGate.ready, LauncherFlag.readyFD)
            place(startGate.fifo, LauncherFlag.startFD)
        }
        if let enter { place(enter, LauncherFlag.enterFD) }
        if initSignals { plan.arguments.append(LauncherFlag.initSignals) }
        plan.closeFrom = next
        if let spawner { return try spawner.spawn(plan) }
        // The daemon's fds sit above every target; a short-lived caller's may not.
        guard plan.sources.contains(where: { $0 < plan.closeFrom }) else {
            return try plan.run(with: plan.sources)
        }
        let moved = try plan.movedAboveTargets(plan.sources)
        defer { for fd in moved { close(fd) } }
        return try plan.run(with: moved)
    }

    public static func memfd(_ name: String, _ bytes: [UInt8]) throws -> Int32 {
        let fd = appd_memfd(name)
        guard fd >= 0 else { throw AppdError.system("memfd_create \(name)") }
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard written > 0 else {
                close(fd)
                throw AppdError.system("write \(name)")
            }
            offset += written
        }
        lseek(fd, 0, SEEK_SET)
        return fd
    }

    public static func wait(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        _ = retryingInterrupts { waitpid(pid, &status, 0) }
        return status
    }

    public static func readAll(_ fd: Int32) -> String {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        while true {
            let count = retryingInterrupts { read(fd, &buffer, buffer.count) }
            guard count > 0 else { break }
            bytes += buffer[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// While `body` runs, SIGTERM/SIGHUP/SIGUSR1/SIGUSR2 sent to appd go to the launcher (which
    /// passes them to the app), and SIGINT/SIGQUIT from the terminal are left to the launcher,
    /// which got them too (same process group), as `system(3)` does.
    private static func forwardingSignals<T>(to pid: pid_t, _ body: () -> T) -> T {
        forwardTarget = pid
        let forwarded = [SIGTERM, SIGHUP, SIGUSR1, SIGUSR2]
        var saved: [Int32: sigaction] = [:]
        for signal in forwarded + [SIGINT, SIGQUIT] {
            var action = sigaction()
            if forwarded.contains(signal) {
                action.__sigaction_handler.sa_handler = { signal in kill(forwardTarget, signal) }
            } else {
                action.__sigaction_handler.sa_handler = SIG_IGN
            }
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            var old = sigaction()
            sigaction(signal, &action, &old)
            saved[signal] = old
        }
        defer {
            for (signal, var old) in saved { sigaction(signal, &old, nil) }
        }
        return body()
    }
}

/// The launcher a signal handler forwards to (a C handler cannot capture context).
nonisolated(unsafe) private var forwardTarget: pid_t = 0
