import AppdBase
import CLinux
import Foundation
import Glibc
import LauncherProtocol
import Sandbox
import Synchronization

/// Each app's shared namespaces (docs/launcher-protocol.md, "Shared namespaces"): its root
/// (a mount namespace built once by `appd-exec --template`, everything but /proc and /dev's
/// per-instance mounts, its tmpfs read-only), its network namespace (loopback up) and its uts
/// namespace (its hostname), kept here by fd. A launch whose profile asks for exactly that
/// root joins them: it copies the mount namespace and mounts its own procfs, /dev/shm and
/// devpts, in its own pid, ipc and cgroup namespaces, instead of building everything. At 1,000
/// instances that is most of a launch's kernel work (issue 15).
///
/// What instances of one app share through it: the read-only root and the loopback interface
/// (and with it abstract unix socket names), as they share the data container. Never across
/// apps: the key is the app and its profile's namespace part.
///
/// A template is rebuilt, on the next launch, when that part of the profile changes (settings,
/// an update), when a bind source was replaced on the host (its device and inode, which a
/// bind pins, are part of the key: a file renamed over `/etc/resolv.conf`, an updated
/// `ld.so.cache`), and after `maxAge`; it is dropped at uninstall and when unused for `idleLimit`
/// (at the next instance exit). Building one never fails a launch: the launch then builds its
/// own namespaces, as it did before.
public final class NamespaceTemplates: Sendable {
    /// A launch's own copies of a template's fds (close-on-exec): the launch hands them to
    /// appd-exec and closes them, whatever happens to the template meanwhile.
    public typealias Lease = SharedNamespaces

    /// What a template is built from: the profile's namespace part (the records `unshare` to
    /// `console`), and the device and inode of every bind source as they were.
    struct Key: Equatable {
        var namespaces: [SandboxProfile.Namespace]
        var hostname: String
        var loopback: Bool
        var mounts: [SandboxProfile.Mount]
        var console: Bool
        var sources: [SourceIdentity]
    }

    /// A bind source's device and inode (a bind pins them); 0, 0 when it does not exist.
    struct SourceIdentity: Equatable {
        var device: UInt64
        var inode: UInt64
    }

    private struct Template {
        var key: Key
        var fds: Lease
        var built: ContinuousClock.Instant
        var used: ContinuousClock.Instant
    }

    private enum Slot {
        case building(key: Key)
        case ready(Template)
        /// The last build failed: no retry for this key until `retryAfter`.
        case failed(key: Key, retryAfter: ContinuousClock.Instant)
    }

    /// At most this many apps' templates are kept (each holds a mount and a network namespace
    /// in the kernel); the least recently used goes first.
    static let capacity = 64
    static let maxAge: Duration = .seconds(600)
    static let idleLimit: Duration = .seconds(120)
    static let retryDelay: Duration = .seconds(60)
    /// How long the daemon waits for `appd-exec --template` to say it is ready.
    static let buildTimeoutMilliseconds: Int32 = 5000

    private let slots = Mutex<[SlotName: Slot]>([:])
    private let failureReporter = Mutex<(@Sendable (String) -> Void)?>(nil)

    public init() {}

    /// Where a failed build is told (the daemon's log); launches go on without a template.
    public func onFailure(_ report: @escaping @Sendable (String) -> Void) {
        failureReporter.withLock { $0 = report }
    }

    /// Whether a profile can share namespaces: a tmpfs root in a mount namespace, no user
    /// namespace.
    public static func eligible(_ profile: SandboxProfile) -> Bool {
        profile.namespaces.contains(.mount) && !profile.namespaces.contains(.user)
    }

    /// Copies of the fds of the app's template for `profile`, building it first when there is
    /// none (one build per app at a time: launches meanwhile get nil and build their own).
    /// nil when the profile cannot share, or the build failed.
    public func lease(for profile: SandboxProfile, launcher: String) -> Lease? {
        guard Self.eligible(profile) else { return nil }
        // Console launches (a devpts in /dev) have a template of their own: switching between
        // the two does not rebuild either.
        let app = SlotName(app: AppID(profile.app.bundleID), console: profile.console)
        let key = Self.key(profile)
        let now = ContinuousClock.now
        enum Next {
            case leased(Lease?)
            case build, none
        }
        let next: Next = slots.withLock { slots in
            switch slots[app] {
            case .ready(var template)?
            where template.key == key && now - template.built < Self.maxAge:
                template.used = now
                slots[app] = .ready(template)
                return .leased(Self.duplicate(template.fds))
            case .building?:
                return .none
            case .failed(let failedKey, let retryAfter)? where failedKey == key && now < retryAfter:
                return .none
            case .ready(let stale)?:
                stale.fds.close()
                fallthrough
            default:
                slots[app] = .building(key: key)
                return .build
            }
        }
        switch next {
        case .leased(let lease): return lease
        case .none: return nil
        case .build: break
        }
        let built: Lease
        do {
            built = try Self.build(profile, launcher: launcher)
        } catch {
            slots.withLock { $0[app] = .failed(key: key, retryAfter: .now + Self.retryDelay) }
            let report = failureReporter.withLock { $0 }
            report?(
                "the shared namespaces of \(profile.app.bundleID) could not be built (\(error)); "
                    + "its launches build their own for \(Self.retryDelay.components.seconds) s")
            return nil
        }
        let template = Template(key: key, fds: built, built: .now, used: .now)
        return slots.withLock { slots in
            guard case .building(let building)? = slots[app], building == key else {
                // Forgotten (an uninstall) while it was built.
                built.close()
                return nil
            }
            slots[app] = .ready(template)
            Self.evict(&slots)
            return Self.duplicate(built)
        }
    }

    /// Drops the app's template (an uninstall: nothing of its containers stays held).
    public func forget(app: AppID) {
        let removed = slots.withLock { slots in
            [false, true].compactMap {
                slots.removeValue(forKey: SlotName(app: app, console: $0))
            }
        }
        for case .ready(let template) in removed { template.fds.close() }
    }

    /// Whose template a slot holds: an app's, for console launches or the others.
    struct SlotName: Hashable {
        var app: AppID
        var console: Bool
    }

    /// Drops the templates no launch used for `idleLimit`.
    public func sweep() {
        let now = ContinuousClock.now
        let idle: [Lease] = slots.withLock { slots in
            var idle: [Lease] = []
            for (app, slot) in slots {
                guard case .ready(let template) = slot, now - template.used >= Self.idleLimit else {
                    continue
                }
                idle.append(template.fds)
                slots[app] = nil
            }
            return idle
        }
        for fds in idle { fds.close() }
    }

    /// How many templates are held (the metrics and tests).
    public var count: Int {
        slots.withLock { $0.values.count { if case .ready = $0 { true } else { false } } }
    }

    /// The profile's namespace part, and the device and inode of every bind source as they
    /// are now (a missing ro-bind-try source is part of it too). Compared as values, not
    /// encoded: this runs on every launch.
    static func key(_ profile: SandboxProfile) -> Key {
        var sources: [SourceIdentity] = []
        sources.reserveCapacity(profile.mounts.count)
        for mount in profile.mounts {
            switch mount.kind {
            case .roBind, .roBindTry, .rwBind, .rwBindExec, .devBind:
                var status = stat()
                if let source = mount.source, stat(source, &status) == 0 {
                    sources.append(
                        SourceIdentity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino)))
                } else {
                    sources.append(SourceIdentity(device: 0, inode: 0))
                }
            default: continue
            }
        }
        return Key(
            namespaces: profile.namespaces, hostname: profile.hostname, loopback: profile.loopback,
            mounts: profile.mounts, console: profile.console, sources: sources)
    }

    private static func duplicate(_ fds: Lease) -> Lease? {
        func copy(_ fd: Int32) -> Int32 { fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0) }
        let lease = Lease(
            mount: copy(fds.mount), root: copy(fds.root), net: copy(fds.net), uts: copy(fds.uts))
        if lease.mount < 0 || lease.root < 0 || (fds.net >= 0 && lease.net < 0)
            || (fds.uts >= 0 && lease.uts < 0)
        {
            lease.close()
            return nil
        }
        return lease
    }

    private static func evict(_ slots: inout [SlotName: Slot]) {
        var ready = slots.compactMap { app, slot -> (SlotName, Template)? in
            if case .ready(let template) = slot { (app, template) } else { nil }
        }
        guard ready.count > capacity else { return }
        ready.sort { $0.1.used < $1.1.used }
        for (app, template) in ready.prefix(ready.count - capacity) {
            template.fds.close()
            slots[app] = nil
        }
    }

    /// Runs `appd-exec --template` and takes its namespaces: waits for its `ready` (or its
    /// error) on a pipe, opens `/proc/PID/ns/*` and `/proc/PID/root` while it waits (our unreaped child: the pid
    /// cannot have been reused), then kills and reaps it.
    static func build(_ profile: SandboxProfile, launcher: String) throws -> Lease {
        let profileFD = try SandboxLaunch.memfd("appd-profile", Array(profile.encoded().utf8))
        defer { close(profileFD) }
        var status: [Int32] = [-1, -1]
        guard appd_pipe_cloexec(&status) == 0 else {
            throw AppdError.system("pipe for the template's status")
        }
        defer { close(status[0]) }
        let pid: pid_t
        do {
            pid = try spawnTemplate(launcher: launcher, profileFD: profileFD, statusFD: status[1])
        } catch {
            close(status[1])
            throw error
        }
        close(status[1])
        defer {
            kill(pid, SIGKILL)
            _ = SandboxLaunch.wait(pid)
        }
        let line = readLine(status[0], timeoutMilliseconds: buildTimeoutMilliseconds)
        guard line == LauncherStatus.readyLine else {
            let reason: String
            if case .failed(let message)? = LauncherStatus(line: line) {
                reason = message
            } else {
                reason = line.isEmpty ? "it ended without a word" : line
            }
            throw AppdError(.io, "appd-exec --template: \(reason)")
        }
        func open(_ name: String, _ flags: Int32 = O_RDONLY) throws -> Int32 {
            let fd = Glibc.open("/proc/\(pid)/\(name)", flags | O_CLOEXEC)
            guard fd >= 0 else { throw AppdError.system("open /proc/\(pid)/\(name)") }
            return fd
        }
        var lease = Lease(mount: -1, root: -1, net: -1, uts: -1)
        do {
            lease.mount = try open("ns/mnt")
            lease.root = try open("root", O_RDONLY | O_DIRECTORY)
            if profile.namespaces.contains(.net) { lease.net = try open("ns/net") }
            if profile.namespaces.contains(.uts) { lease.uts = try open("ns/uts") }
        } catch {
            lease.close()
            throw error
        }
        return lease
    }

    private static func spawnTemplate(launcher: String, profileFD: Int32, statusFD: Int32) throws
        -> pid_t
    {
        let null = open("/dev/null", O_WRONLY | O_CLOEXEC)
        guard null >= 0 else { throw AppdError.system("open /dev/null") }
        defer { close(null) }
        var plan = SpawnPlan(
            path: launcher,
            arguments: [
                launcher, LauncherFlag.template, LauncherFlag.profileFD, "3", LauncherFlag.statusFD,
                "4",
            ],
            newSession: false)
        plan.stdinFromDevNull = true
        plan.place(null, at: 1)
        plan.place(null, at: 2)
        plan.place(profileFD, at: 3)
        plan.place(statusFD, at: 4)
        plan.closeFrom = 5
        return try plan.run(with: plan.sources)
    }

    /// The first line on `fd` (at most 4 KiB), or what came before the timeout or EOF.
    private static func readLine(_ fd: Int32, timeoutMilliseconds: Int32) -> String {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        let deadline = ContinuousClock.now + .milliseconds(Int(timeoutMilliseconds))
        while bytes.count < 4096, !bytes.contains(0x0A) {
            let left = deadline - .now
            guard left > .zero else { break }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let wait =
                Int32(
                    left.components.seconds * 1000 + left.components.attoseconds
                        / 1_000_000_000_000_000) + 1
            let ready = poll(&entry, 1, wait)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { break }
            let count = retryingInterrupts { read(fd, &buffer, buffer.count) }
            guard count > 0 else { break }
            bytes += buffer[..<count]
        }
        let line = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).first ?? []
        return String(decoding: line, as: UTF8.self)
    }
}
