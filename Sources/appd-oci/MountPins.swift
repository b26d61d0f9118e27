import AppdBase
import CLinux
import Foundation
import Glibc
import Sandbox

/// How the launcher mounts exactly what appd-oci opened and checked (HostPaths): the launcher
/// builds the sandbox in a mount namespace of its own, where `open_tree` refuses a mount of
/// another namespace (EINVAL), so it cannot clone appd-oci's fd through `/proc/PID/fd/N`.
/// Instead appd-oci clones each checked fd itself (`open_tree(OPEN_TREE_CLONE)` of
/// `/proc/self/fd/N`: the fd's file, never a path), enters a private copy of its mount namespace
/// for the time of the launch (nothing mounted there propagates to the host), attaches the
/// clones at points in the container's 0700 state folder, and spawns the launcher, which
/// inherits that namespace and clones the pins by those root-only paths. Once the sandbox is
/// built appd-oci goes back to the host's namespace (hooks and systemd see the host's mounts);
/// the pins live on only in the launcher's namespace, and their empty mount points go with the
/// state folder.
struct MountPins {
    private var host: Int32 = -1
    let directory: String

    /// Clones `held`, enters a private copy of the mount namespace and attaches each clone in
    /// `directory` (made here); then points the profile's sources at the pins: each source
    /// naming an fd (`Opened.source`, or a path below it) is rewritten.
    ///
    /// Before Linux 5.2 (no open_tree) nothing is pinned: the profile names the checked paths,
    /// which only root may change (RootFilesystem's rule for the folders above a root), and nil
    /// is returned.
    static func enter(
        directory: String, pinning held: [HostPaths.Opened], profile: inout SandboxProfile,
        overlay: (root: OverlayRoot, hostID: UInt32)? = nil
    ) throws -> MountPins? {
        var trees: [(opened: HostPaths.Opened, tree: Int32, directory: Bool)] = []
        defer { for entry in trees { close(entry.tree) } }
        for opened in held {
            var info = stat()
            guard fstat(opened.fd, &info) == 0 else {
                throw AppdError.system("cannot stat \(opened.path)")
            }
            let tree = appd_open_tree_clone("/proc/self/fd/\(opened.fd)", 1)
            if tree < 0 && errno == ENOSYS {
                let unpinned = MountPins(directory: directory)
                for opened in held { unpinned.rewrite(opened, to: opened.path, in: &profile) }
                return nil
            }
            guard tree >= 0 else { throw AppdError.system("cannot clone \(opened.path)") }
            trees.append((opened, tree, info.st_mode & S_IFMT == S_IFDIR))
        }
        // The overlay's layers, cloned here too: open_tree of another namespace's mount is EINVAL.
        let layers =
            try overlay.map { try $0.root.clones(hostID: $0.hostID, count: PlainIDRange.size) }
            ?? []
        defer { for tree in layers { close(tree) } }
        var pins = MountPins(directory: directory)
        pins.host = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC)
        guard pins.host >= 0 else { throw AppdError.system("cannot open /proc/self/ns/mnt") }
        do {
            guard appd_unshare(APPD_CLONE_NEWNS) == 0,
                mount(nil, "/", nil, UInt(MS_REC | MS_PRIVATE), nil) == 0
            else {
                throw AppdError.system("cannot make a private mount namespace for the launch")
            }
            guard mkdir(directory, 0o700) == 0 || errno == EEXIST else {
                throw AppdError.system("cannot create \(directory)")
            }
            for entry in trees {
                let point = "\(directory)/\(entry.opened.fd)"
                if entry.directory {
                    guard mkdir(point, 0o700) == 0 else {
                        throw AppdError.system("cannot create \(point)")
                    }
                } else {
                    let fd = open(point, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
                    guard fd >= 0 else { throw AppdError.system("cannot create \(point)") }
                    close(fd)
                }
                guard appd_move_mount_onto(entry.tree, point) == 0 else {
                    throw AppdError.system("cannot pin \(entry.opened.path) for the launch")
                }
                pins.rewrite(entry.opened, to: point, in: &profile)
            }
            if let overlay {
                profile.imageRoot?.source = try OverlayRoot.mount(
                    layers, in: directory, hostID: overlay.hostID)
            }
        } catch {
            pins.leave()
            throw error
        }
        return pins
    }

    private func rewrite(
        _ opened: HostPaths.Opened, to point: String, in profile: inout SandboxProfile
    ) {
        func rewrite(_ source: String) -> String {
            if source == opened.source { return point }
            if source.hasPrefix(opened.source + "/") {
                return point + source.dropFirst(opened.source.count)
            }
            return source
        }
        for index in profile.mounts.indices {
            if let source = profile.mounts[index].source, profile.mounts[index].kind != .symlink {
                profile.mounts[index].source = rewrite(source)
            }
        }
        if let image = profile.imageRoot { profile.imageRoot?.source = rewrite(image.source) }
    }

    /// Back to the host's mount namespace.
    mutating func leave() {
        guard host >= 0 else { return }
        _ = appd_setns(host, APPD_CLONE_NEWNS)
        close(host)
        host = -1
    }
}
