import AppdBase
import CLinux
import Glibc
import Sandbox

/// `tmp/` is the system's (docs/threat-model.md, "The data container"): iOS may empty it
/// while the app is not running, and appd does when the app's last instance exits, or at the
/// next launch when a daemon crash missed that exit. The tree is the app's, emptied as root:
/// each component is opened with O_NOFOLLOW from the data containers' folder down, and the
/// contents go through `removeTree`, which follows no symlink, crosses no mount and holds at
/// most three fds at any depth (FileDescriptor+RemoveTree.swift).
extension AppStore {
    /// The app's `tmp/`, opened without following a link at any step; nil when it is not
    /// there (or is not a directory: the app replaced it with a link or a file, which
    /// `appd doctor --repair` mends and nobody follows).
    func openTemporaryDirectory(of app: InstalledApp) throws -> FileDescriptor? {
        try openDataFolder(of: app, ["tmp"])
    }

    /// A folder of the app's data container (`["Library", "Caches"]`), each component opened
    /// without following a link; nil when one is missing or not a directory.
    func openDataFolder(of app: InstalledApp, _ components: [String]) throws -> FileDescriptor? {
        var folder = try FileDescriptor.directory(root.dataContainersPath)
        do {
            for name in [app.dataUUID] + components { folder = try folder.openDirectory(name) }
            return folder
        } catch let error as AppdError where [ENOENT, ENOTDIR, ELOOP].contains(error.errno ?? 0) {
            return nil
        }
    }

    /// Whether the app's `tmp/` holds anything (one readdir; nothing else is read).
    public func temporaryDirectoryHasEntries(of app: InstalledApp) throws -> Bool {
        guard let tmp = try openTemporaryDirectory(of: app) else { return false }
        return try tmp.hasEntries()
    }

    /// Removes everything in the app's `tmp/` (not the folder itself, which keeps its owner and
    /// mode) and returns how many entries it held at its top. Call only while no instance of
    /// the app runs. A mount point found inside stops the emptying with an error naming it.
    @discardableResult
    public func emptyTemporaryDirectory(of app: InstalledApp) throws -> Int {
        try emptyDataFolder(of: app, ["tmp"])
    }

    /// Removes everything in the folder (`removeTree`: no link followed, no mount crossed) and
    /// returns how many entries it held at its top.
    func emptyDataFolder(of app: InstalledApp, _ components: [String]) throws -> Int {
        guard let folder = try openDataFolder(of: app, components) else { return 0 }
        guard appd_is_mount_root(folder.raw) != 1 else {
            throw AppdError(
                .io, "\(folder.path) is a mount point: appd does not empty what is mounted there",
                hint: "unmount it, then run 'appd doctor --repair'")
        }
        let names = try folder.entries()
        for name in names { try folder.removeTree(name) }
        return names.count
    }
}
