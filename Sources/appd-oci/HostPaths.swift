import AppdBase
import CLinux
import Foundation
import Glibc

/// What of the host a container may be given by path (docs/oci-runtime.md, "What of the host a
/// container is given"): its root filesystem, a plain container's read-only binds, the volume
/// at `/appd/data`. Each is opened once here, checked through that fd, and mounted from that fd
/// (MountPins clones it and pins the clone where the launcher takes it): a folder swapped for a
/// link after the check changes nothing.
///
/// Two lists of host folders no container may be given, nor anything inside one, nor a folder
/// holding one:
/// - appd's and appd-oci's own state: the state root in use and `/run/appd-oci`, the plain
///   containers' id slots, the node's uid map (`/var/lib/appd-oci`), appd's state root and
///   runtime folder. Never reachable from any container, read-only or not.
/// - the host's system folders (`/etc`, `/usr`, `/home`, `/root`, …): never a root filesystem
///   or a data volume (a plain container may still bind them read-only, as under runc).
enum HostPaths {
    /// A path opened once (`O_PATH`), and the name it was checked under.
    struct Opened {
        var fd: Int32
        /// The canonical path the fd names (what the checks and messages use).
        var path: String
        /// How the profile names it until MountPins points the profile at its pin (a source
        /// that is this, or a path below it, is rewritten).
        var source: String { "/proc/\(getpid())/fd/\(fd)" }

        func close() { _ = Glibc.close(fd) }
    }

    static let system = [
        "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/dev",
        "/proc", "/sys", "/root", "/home", "/var/log", "/var/spool", "/var/mail",
        "/var/backups", "/var/cache", "/run/systemd", "/run/user", "/run/dbus",
    ]

    /// appd-oci's own state (`stateRoot`: the `--root` in use) and appd's.
    static func own(stateRoot: String) -> [String] {
        [
            stateRoot, StateRoot.defaultPath, PlainIDRange.directory, NodeUIDs.defaultDirectory,
            "/var/lib/appd-oci", "/var/lib/appd", "/run/appd", "/run/appd-oci-userns",
        ].map { canonical($0) }
    }

    /// `path` resolved as far as it exists (so `/tmp/x/state` and a link to it compare equal).
    static func canonical(_ path: String) -> String {
        if let resolved = realpath(path, nil) {
            defer { free(resolved) }
            return String(cString: resolved)
        }
        return OCIConfigCheck.normalized(path)
    }

    /// Whether `a` and `b` are the same folder or one lies inside the other.
    static func overlap(_ a: String, _ b: String) -> Bool {
        func inside(_ inner: String, _ outer: String) -> Bool {
            inner == outer || outer == "/" || inner.hasPrefix(outer + "/")
        }
        return inside(a, b) || inside(b, a)
    }

    /// The first of `folders` that `path` is, lies in, or holds.
    static func overlapping(_ path: String, _ folders: [String]) -> String? {
        folders.first { overlap(path, $0) }
    }

    /// Opens `path` (links followed, as a mount follows them) and refuses it, naming `what`,
    /// the path and the rule, when it is or holds or lies in appd's or appd-oci's state, or
    /// (`system`) in a system folder.
    static func open(
        _ path: String, what: String, stateRoot: String, system refuseSystem: Bool
    ) throws -> Opened {
        let fd = Glibc.open(path, appd_o_path() | O_CLOEXEC)
        guard fd >= 0 else { throw AppdError.system("cannot open \(what) \(path)") }
        let opened = Opened(fd: fd, path: Self.path(of: fd) ?? path)
        do {
            try refuse(opened.path, what: what, stateRoot: stateRoot, system: refuseSystem)
        } catch {
            opened.close()
            throw error
        }
        return opened
    }

    /// Throws when `path` (canonical) is one the lists keep from containers.
    static func refuse(_ path: String, what: String, stateRoot: String, system refuseSystem: Bool)
        throws
    {
        if let folder = overlapping(path, own(stateRoot: stateRoot)) {
            throw AppdError(
                .permissionDenied,
                "\(what) \(path) is or holds or lies in \(folder), appd's own state: no container is given it"
            )
        }
        if refuseSystem, let folder = overlapping(path, system) {
            throw AppdError(
                .permissionDenied,
                "\(what) \(path) is or holds or lies in the system folder \(folder): a container may not own it"
            )
        }
    }

    /// The path the kernel names for `fd` (readlink of /proc/self/fd/N).
    static func path(of fd: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/fd/\(fd)", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
