import AppBundle
import AppdBase
import Glibc

/// The state root (default `/var/lib/appd`) and the layout under it:
///
///     registry.sqlite                      installed apps and their uids (SQLite, WAL)
///     Containers/Bundle/<UUID>/Name.app    bundles: root-owned, read-only
///     Containers/Data/<UUID>/              data containers: the app's uid, 0700
///     Containers/Shared/AppGroup/<UUID>/   application-group containers
///     staging/                             work in progress; emptied at every start
///     quarantine/                          what recovery could not remove (doctor reports it)
///     .lock                                held (flock) by whoever changes anything
///     daemon.pid                           held (flock) by the one `appd serve` of this root; its pid
///     .mutating                            an install or uninstall began and has not finished
///
/// The rule that keeps crashes harmless: a container the registry does not name is garbage.
/// Installs publish containers first and commit the registry row last; uninstalls commit first
/// and remove containers after; so a crash at any point leaves at most unnamed containers,
/// which `recover()` removes. Such leftovers need an unfinished change, which `.mutating`
/// records, so the full scan runs only then (and on a store's first change), not on every one.
public struct StateRoot: Sendable {
    public let path: String

    public init(path: String) {
        // Messages and registry paths read better without a trailing slash.
        var path = path
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        self.path = path
    }

    public var registryPath: String { "\(path)/registry.sqlite" }
    public var containersPath: String { "\(path)/Containers" }
    public var bundleContainersPath: String { "\(path)/Containers/Bundle" }
    public var dataContainersPath: String { "\(path)/Containers/Data" }
    public var groupContainersPath: String { "\(path)/Containers/Shared/AppGroup" }
    public var stagingPath: String { "\(path)/staging" }
    /// Leftovers whose removal failed, moved aside so that they never block a later change.
    public var quarantinePath: String { "\(path)/quarantine" }
    var lockPath: String { "\(path)/.lock" }
    /// Held by the daemon serving this root for as long as it runs (`DaemonLock`).
    public var daemonLockPath: String { "\(path)/daemon.pid" }
    /// Present while an install or uninstall runs, and after one that did not finish.
    var mutationMarkPath: String { "\(path)/.mutating" }

    public func bundleContainer(_ uuid: String) -> String { "\(bundleContainersPath)/\(uuid)" }
    public func dataContainer(_ uuid: String) -> String { "\(dataContainersPath)/\(uuid)" }

    /// The directories of the layout and their modes. 0711 where apps must pass through to
    /// reach their own container but must not list the others (the UUIDs are the secret).
    static let layout: [(path: String, mode: mode_t)] = [
        ("", 0o711),
        ("Containers", 0o711),
        ("Containers/Bundle", 0o711),
        ("Containers/Data", 0o711),
        ("Containers/Shared", 0o711),
        ("Containers/Shared/AppGroup", 0o711),
        ("staging", 0o700),
        ("quarantine", 0o700),
    ]

    /// Creates whatever part of the layout is missing; repairs nothing that exists (that is
    /// `doctor`'s job, which reports it).
    func createLayout() throws {
        for (relative, mode) in Self.layout {
            let full = relative.isEmpty ? path : "\(path)/\(relative)"
            if mkdir(full, mode) == 0 {
                // mkdir applies the umask; the layout's modes are part of its security.
                guard chmod(full, mode) == 0 else { throw AppdError.system("chmod \(full)") }
            } else if errno != EEXIST {
                throw AppdError.system(
                    "create \(full)",
                    hint: relative.isEmpty
                        ? "choose another state root with --root or APPD_ROOT" : nil)
            }
            var st = stat()
            guard lstat(full, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else {
                throw AppdError(
                    .corruptState, "\(full) exists but is not a directory (or is a symlink)")
            }
        }
    }
}

/// An exclusive `flock` on the state root's lock file: one changer at a time, across
/// processes. Readers (list, info) do not take it; SQLite's WAL gives them a consistent view.
public final class StateLock {
    private let fd: Int32

    /// Waits for the lock; `onWait` is called once if someone else holds it.
    public init(_ root: StateRoot, onWait: () -> Void = {}) throws {
        fd = open(root.lockPath, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw AppdError.system("open \(root.lockPath)") }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK else {
                close(fd)
                throw AppdError.system("lock \(root.lockPath)")
            }
            onWait()
            guard retryingInterrupts({ flock(fd, LOCK_EX) }) == 0 else {
                let code = errno
                close(fd)
                throw AppdError.system("lock \(root.lockPath)", errno: code)
            }
        }
    }

    deinit { close(fd) }
}

/// One `appd serve` per state root: an exclusive `flock` on `daemon.pid` in the root, held for
/// the daemon's life (the kernel lets go of it when the process ends, however it ends), with
/// the holder's pid written in the file for the next one's message. Two daemons on one root
/// would each recover the other's installs in progress and adopt each other's instances.
///
/// In the root itself, not in its runtime directory: two paths to one root (a symlink, a bind
/// mount) lead to the same file, and the lock is on the file.
public final class DaemonLock {
    private let fd: Int32

    /// Takes the lock or throws `.conflict` naming the pid that holds it; never waits.
    public init(_ root: StateRoot) throws {
        // Only the root itself, so that the lock comes before anything else is looked at (the
        // rest of the layout is the store's, which refuses a root that is a symlink: the lock
        // still names the daemon that holds it through one).
        if mkdir(root.path, 0o711) == 0 {
            guard chmod(root.path, 0o711) == 0 else { throw AppdError.system("chmod \(root.path)") }
        }
        let path = root.daemonLockPath
        fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw AppdError.system("open \(path)") }
        if retryingInterrupts({ flock(fd, LOCK_EX | LOCK_NB) }) != 0 {
            let code = errno
            let holder = Self.recordedPID(fd)
            close(fd)
            guard code == EWOULDBLOCK else { throw AppdError.system("lock \(path)", errno: code) }
            let who = holder.map { "appd serve pid \($0)" } ?? "another appd serve"
            throw AppdError(
                .conflict,
                "\(who) is already serving the state root \(root.path) (it holds \(path))",
                hint:
                    "stop it first (\(holder.map { "kill \($0)" } ?? "see \(path)"), or systemctl stop appd), or serve another root with --root"
            )
        }
        let text = Array("\(getpid())\n".utf8)
        guard ftruncate(fd, 0) == 0,
            text.withUnsafeBytes({ pwrite(fd, $0.baseAddress, $0.count, 0) }) == text.count
        else {
            let code = errno
            close(fd)
            throw AppdError.system("write \(path)", errno: code)
        }
    }

    /// The pid the holder wrote (at most 32 bytes read: the file is root's, but a pid is short).
    static func recordedPID(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let digits = buffer[..<count].prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        return Int32(String(decoding: digits, as: UTF8.self)).flatMap { $0 > 0 ? $0 : nil }
    }

    deinit { close(fd) }
}
