import AppdBase
import Glibc

/// The app's home: `Documents`, `Library/Preferences`, `Library/Caches`, `tmp`, all owned by
/// the app's uid and gid, mode 0700.
public enum DataContainer {
    /// Top-level directories and their children. Walked one component at a time with
    /// O_NOFOLLOW: when doctor repairs an existing container its contents are the app's, and a
    /// symlink planted as `Library` must not steer a root chown outside the container.
    public static let directories: [(name: String, children: [String])] = [
        ("Documents", []), ("Library", ["Preferences", "Caches"]), ("tmp", []),
    ]

    /// The same, as paths relative to the container (`Library/Caches`).
    public static var standardPaths: [String] {
        directories.flatMap { top in [top.name] + top.children.map { "\(top.name)/\($0)" } }
    }

    /// What is wrong with the container at `path`: each standard directory must be a real
    /// directory (not a symlink), owned by the app, mode 0700. Checked with lstat, one level at
    /// a time, so nothing the app planted is followed.
    public static func problems(at path: String, uid: uid_t, gid: gid_t) -> [String] {
        var problems: [String] = []
        func check(_ relative: String) -> Bool {
            let label = relative.isEmpty ? "the container" : relative
            var st = stat()
            guard lstat(relative.isEmpty ? path : "\(path)/\(relative)", &st) == 0 else {
                problems.append("\(label) is missing")
                return false
            }
            guard st.st_mode & S_IFMT == S_IFDIR else {
                problems.append(
                    "\(label) is not a directory (a symlink or file the app put there?)")
                return false
            }
            if st.st_uid != uid || st.st_gid != gid || st.st_mode & 0o7777 != 0o700 {
                problems.append(
                    "\(label) is owner \(st.st_uid):\(st.st_gid) mode \(String(st.st_mode & 0o7777, radix: 8)), expected \(uid):\(gid) mode 700"
                )
            }
            return true
        }
        guard check("") else { return problems }
        for (name, children) in directories where check(name) {
            for child in children { _ = check("\(name)/\(child)") }
        }
        return problems
    }

    public static func create(in parent: FileDescriptor, name: String, uid: uid_t, gid: gid_t)
        throws
    {
        let top = try parent.makeDirectory(name, mode: 0o700)
        try populate(top, uid: uid, gid: gid)
    }

    /// Creates the standard directories that are missing and sets owner and mode on all of them.
    public static func populate(_ top: FileDescriptor, uid: uid_t, gid: gid_t) throws {
        func ensure(_ name: String, in parent: FileDescriptor) throws -> FileDescriptor {
            if mkdirat(parent.raw, name, 0o700) != 0 && errno != EEXIST {
                throw AppdError.system("mkdir \(parent.child(name))")
            }
            let dir = try parent.openDirectory(name)
            try dir.chmod(0o700)
            try dir.chown(uid: uid, gid: gid)
            return dir
        }
        try top.chmod(0o700)
        try top.chown(uid: uid, gid: gid)
        for (name, children) in directories {
            let dir = try ensure(name, in: top)
            for child in children { _ = try ensure(child, in: dir) }
        }
    }
}
