import AppBundle
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
                    hint: relative.isEmpty ? "choose another state root with --root or APPD_ROOT" : nil)
            }
            var st = stat()
            guard lstat(full, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else {
                throw AppdError(.corruptState, "\(full) exists but is not a directory (or is a symlink)")
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
            while flock(fd, LOCK_EX) != 0 {
                guard errno == EINTR else {
                    close(fd)
                    throw AppdError.system("lock \(root.lockPath)")
                }
            }
        }
    }

    deinit { close(fd) }
}
