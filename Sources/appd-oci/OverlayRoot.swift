import AppdBase
import CLinux
import Foundation
import Glibc

/// A plain container's writable root on an engine's overlay snapshot (docs/oci-runtime.md,
/// "Plain containers"): no kernel idmaps a merged overlay, so appd-oci builds one of its own.
/// Its lower layers are the engine's (its upperdir on top, then its lowerdirs, as the kernel's
/// mountinfo names them for the root's mount), each cloned and idmapped **read-only** onto the
/// container's range, so the image's root files are the container's root's; its upper layer is
/// a folder in the container's 0700 state folder, owned by the range's first id and written
/// with the host's ids (never idmapped): what the container writes is stored as its
/// unprivileged range, in appd-oci's state, and goes with `delete`. The engine's layers are
/// never written.
///
/// A layer is used only as a root filesystem would be (RootFilesystem, HostPaths): a directory
/// owned by root, in folders only root may change, no system folder or appd state, nothing
/// mounted below it. Any other snapshot (relative or escaped layer paths, data-only layers,
/// metacopy, a layer that fails a rule, more than `maximumLayers`) gets the read-only tmpfs
/// layout instead, as before.
struct OverlayRoot {
    static let maximumLayers = 128
    /// The image root's source in the profile until MountPins has mounted the overlay.
    static let placeholder = "/appd-oci-overlay"

    /// The engine's layers, top first.
    var layers: [HostPaths.Opened]

    func close() { for layer in layers { layer.close() } }

    /// Whether the filesystem of `folder` (the container's state folder) can hold an overlay's
    /// upper layer: tmpfs, ext2/3/4, xfs, btrfs. Elsewhere (an overlay, NFS) the tmpfs layout.
    static func canHoldUpper(_ folder: String) -> Bool {
        [0x0102_1994, 0xEF53, 0x5846_5342, 0x9123_683E].contains(appd_filesystem_type(folder))
    }

    /// The layers of the overlay mounted at `root`, checked and opened; nil when `root` is no
    /// overlay mount root or its layers cannot be used.
    static func layers(of root: HostPaths.Opened, stateRoot: String) -> OverlayRoot? {
        guard appd_is_mount_root(root.fd) == 1,
            appd_filesystem_type("/proc/self/fd/\(root.fd)") == RootFilesystem.overlayMagic,
            let options = superOptions(at: root.path),
            let paths = layerPaths(options)
        else { return nil }
        var opened: [HostPaths.Opened] = []
        for path in paths {
            guard let layer = checked(path, stateRoot: stateRoot) else {
                for layer in opened { layer.close() }
                return nil
            }
            opened.append(layer)
        }
        return OverlayRoot(layers: opened)
    }

    /// The super options of the topmost overlay mounted at `point` (mountinfo's last field).
    static func superOptions(at point: String) -> String? {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)
        else { return nil }
        var found: String?
        for line in text.split(separator: "\n") {
            let halves = line.components(separatedBy: " - ")
            guard halves.count == 2 else { continue }
            let fields = halves[0].split(separator: " ")
            let tail = halves[1].split(separator: " ")
            guard fields.count > 4, tail.count >= 3, tail[0] == "overlay",
                RootFilesystem.unescape(fields[4]) == point
            else { continue }
            found = String(tail[2])
        }
        return found
    }

    /// The layer paths `options` names, top first: `upperdir`, then `lowerdir` (colon
    /// separated) or each `lowerdir+`. nil for what is not used here: a relative or escaped
    /// path, data-only layers, metacopy, no lower layer, too many.
    static func layerPaths(_ options: String) -> [String]? {
        var upper: [String] = []
        var lower: [String] = []
        for option in options.split(separator: ",") {
            let pair = option.split(separator: "=", maxSplits: 1).map {
                RootFilesystem.unescape($0)
            }
            let key = pair[0]
            let value = pair.count > 1 ? pair[1] : ""
            switch key {
            case "upperdir": upper = [value]
            case "lowerdir":
                guard !value.contains("::") else { return nil }
                lower += value.split(separator: ":").map(String.init)
            case "lowerdir+": lower.append(value)
            case "datadir+": return nil
            case "metacopy" where value == "on": return nil
            default: continue
            }
        }
        let paths = upper + lower
        guard !lower.isEmpty, paths.count <= maximumLayers,
            paths.allSatisfy({ $0.hasPrefix("/") && !$0.contains("\\") })
        else { return nil }
        return paths
    }

    /// `path` opened (links followed: podman's `l/` short names) and held to a root
    /// filesystem's rules; nil when it breaks one.
    static func checked(_ path: String, stateRoot: String) -> HostPaths.Opened? {
        let fd = open(path, appd_o_path() | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        let opened = HostPaths.Opened(fd: fd, path: HostPaths.path(of: fd) ?? path)
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_uid == 0,
            (try? HostPaths.refuse(
                opened.path, what: "a layer", stateRoot: stateRoot, system: true)) != nil,
            RootFilesystem.unsafeAncestor(of: opened.path, owners: [0]) == nil,
            !RootFilesystem.hasSubmounts(opened.path)
        else {
            opened.close()
            return nil
        }
        return opened
    }

    /// Each layer cloned and idmapped read-only (nodev) onto the container's range (`hostID`,
    /// `count` ids): detached trees, made in the host's mount namespace (`open_tree` of another
    /// namespace's mount is EINVAL), for `mount` to attach. The caller closes them.
    func clones(hostID: UInt32, count: UInt32) throws -> [Int32] {
        let userns = appd_mapping_userns(hostID, hostID, count)
        guard userns >= 0 else {
            throw AppdError.system("cannot make the user namespace of the overlay's layers")
        }
        defer { Glibc.close(userns) }
        var trees: [Int32] = []
        do {
            for layer in layers {
                let tree = appd_open_tree_clone("/proc/self/fd/\(layer.fd)", 0)
                guard tree >= 0 else {
                    throw AppdError.system("cannot clone the layer \(layer.path)")
                }
                trees.append(tree)
                let attributes = APPD_MOUNT_ATTR_RDONLY | APPD_MOUNT_ATTR_NODEV
                guard appd_mount_setattr_idmap(tree, userns, attributes) == 0 else {
                    throw AppdError.system("cannot idmap the layer \(layer.path)")
                }
            }
        } catch {
            for tree in trees { Glibc.close(tree) }
            throw error
        }
        return trees
    }

    /// In the launch's private mount namespace (MountPins): the layers' `trees` (`clones`)
    /// attached at `directory/layer-N`; the upper and work folders made in `directory`'s parent
    /// (the container's state folder), the upper owned by `hostID`; the overlay mounted at
    /// `directory/root`, which is returned.
    static func mount(_ trees: [Int32], in directory: String, hostID: UInt32) throws -> String {
        let state = String(directory[..<(directory.lastIndex(of: "/") ?? directory.endIndex)])
        var lower: [String] = []
        for (index, tree) in trees.enumerated() {
            let point = "\(directory)/layer-\(index)"
            guard mkdir(point, 0o700) == 0, appd_move_mount_onto(tree, point) == 0 else {
                throw AppdError.system("cannot attach the overlay's layer \(index)")
            }
            lower.append(point)
        }
        let upper = "\(state)/upper"
        let work = "\(state)/work"
        let root = "\(directory)/root"
        for folder in [upper, work, root] {
            guard mkdir(folder, 0o755) == 0 || errno == EEXIST else {
                throw AppdError.system("cannot create \(folder)")
            }
        }
        // The upper layer's top is the root folder the container sees: its root's, as the
        // image's root is.
        guard chown(upper, hostID, hostID) == 0 else {
            throw AppdError.system("cannot chown \(upper)")
        }
        let options =
            "lowerdir=\(lower.joined(separator: ":")),upperdir=\(upper),workdir=\(work),index=off"
        guard !(lower + [upper, work]).contains(where: { $0.contains(",") || $0.contains(":") }),
            options.utf8.count < 4000
        else {
            throw AppdError(
                .unsupported, "the state folder \(state) cannot name an overlay's layers")
        }
        guard Glibc.mount("overlay", root, "overlay", UInt(MS_NODEV), options) == 0 else {
            throw AppdError.system("cannot mount the container's overlay on \(root)")
        }
        return root
    }
}
