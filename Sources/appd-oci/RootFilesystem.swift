import AppdBase
import CLinux
import Foundation
import Glibc

/// What `root.path` may be (docs/oci-runtime.md, "The root filesystem"). A plain container's
/// root is idmapped onto its ids and written by its root, its mount points made in it; an app
/// container's is where its bundle is read. Either way the container owns it, so it must be a
/// folder the engine made for this container, and nothing else of the host:
/// - **never a symbolic link**, nor named through one: opened with openat2
///   `RESOLVE_NO_SYMLINKS` (runc refuses a linked root too);
/// - **the engine's**: inside the bundle folder or the bundle itself (containerd's snapshot
///   mount `rootfs`, runtime-tools' bundles, whose root.path is `.`), or the root of an overlay mount (podman's and docker's snapshot,
///   `…/overlay/ID/merged`);
/// - **owned as an image is**: a directory owned by root (or the user appd-oci runs as), in
///   folders only they may change (each one above it theirs and not writable by others, unless
///   sticky as /tmp);
/// - **never a system folder or appd's own state** (HostPaths), nor inside one, nor holding one.
///
/// Anything else is refused at `create`, before anything is made, with one line naming the
/// path and the rule. The folder is opened once, and the launcher mounts a clone of this fd
/// (MountPins), never the path.
enum RootFilesystem {
    static let overlayMagic: Int64 = 0x794C_7630

    static func open(_ spec: OCISpec, bundle: String, stateRoot: String) throws -> HostPaths.Opened
    {
        guard let given = spec.root?.path, !given.isEmpty else {
            throw AppdError(.invalidConfig, "config.json has no root.path")
        }
        let named = given.hasPrefix("/") ? given : "\(bundle)/\(given)"
        func refuse(_ rule: String) -> AppdError {
            AppdError(
                .permissionDenied,
                "the root filesystem \(named) \(rule)",
                hint:
                    "a root filesystem is the folder the engine made for this container: in its bundle, or its overlay snapshot (docs/oci-runtime.md)"
            )
        }
        var fd = appd_open_no_symlinks(named, appd_o_path())
        if fd < 0 && errno == ENOSYS {
            // Before Linux 5.6 (no openat2): the path must be its own resolution.
            guard HostPaths.canonical(named) == OCIConfigCheck.normalized(named) else {
                throw refuse("is, or is named through, a symbolic link")
            }
            fd = Glibc.open(named, appd_o_path() | O_NOFOLLOW | O_CLOEXEC)
        }
        guard fd >= 0 else {
            if errno == ELOOP { throw refuse("is, or is named through, a symbolic link") }
            throw AppdError.system("cannot open the root filesystem \(named)")
        }
        var opened = HostPaths.Opened(fd: fd, path: named)
        do {
            opened.path = HostPaths.path(of: fd) ?? OCIConfigCheck.normalized(named)
            var info = stat()
            guard fstat(fd, &info) == 0, info.st_mode & S_IFMT != S_IFLNK else {
                throw refuse("is, or is named through, a symbolic link")
            }
            guard info.st_mode & S_IFMT == S_IFDIR else {
                throw refuse("is not a directory")
            }
            let owners: Set<uid_t> = [0, geteuid()]
            guard owners.contains(info.st_uid) else {
                throw refuse("is owned by uid \(info.st_uid), not by root as an image is")
            }
            // runtime-tools' bundles are their own rootfs (root.path ".").
            let inBundle =
                opened.path == bundle || opened.path.hasPrefix(bundle == "/" ? "/" : bundle + "/")
            let overlayRoot =
                appd_is_mount_root(fd) == 1
                && appd_filesystem_type("/proc/self/fd/\(fd)") == overlayMagic
            guard inBundle || overlayRoot else {
                throw refuse(
                    "is neither the bundle \(bundle) or inside it nor an overlay snapshot's root: it is not a folder the engine made for this container"
                )
            }
            try HostPaths.refuse(
                opened.path, what: "the root filesystem", stateRoot: stateRoot, system: true)
            if let folder = unsafeAncestor(of: opened.path, owners: owners) {
                throw refuse(
                    "lies in \(folder), which others may change (owned by another user, or writable by others and not sticky)"
                )
            }
        } catch {
            opened.close()
            throw error
        }
        return opened
    }

    /// The first folder above `path` that a user other than `owners` could change: owned by
    /// another, or group- or other-writable without the sticky bit.
    static func unsafeAncestor(of path: String, owners: Set<uid_t>) -> String? {
        var folder = path
        while folder != "/" {
            folder = String(folder[..<(folder.lastIndex(of: "/") ?? folder.startIndex)])
            if folder.isEmpty { folder = "/" }
            var info = stat()
            guard lstat(folder, &info) == 0 else { return folder }
            let writableByOthers = info.st_mode & (S_IWGRP | S_IWOTH) != 0
            let sticky = info.st_mode & S_ISVTX != 0
            if !owners.contains(info.st_uid) || (writableByOthers && !sticky) { return folder }
        }
        return nil
    }

    /// Whether a mount lies below `path` (its own mount excluded): an idmapped root clones
    /// and idmaps the mounts below it too, so a root with any is not idmapped.
    static func hasSubmounts(_ path: String) -> Bool {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)
        else { return true }
        let prefix = path == "/" ? "/" : path + "/"
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count > 4 else { continue }
            let point = unescape(fields[4])
            if point.hasPrefix(prefix) { return true }
        }
        return false
    }

    /// mountinfo's octal escapes (`\040` for a space).
    static func unescape(_ field: Substring) -> String {
        var bytes: [UInt8] = []
        var index = field.utf8.startIndex
        let utf8 = field.utf8
        while index < utf8.endIndex {
            let byte = utf8[index]
            if byte == UInt8(ascii: "\\"),
                let end = utf8.index(index, offsetBy: 4, limitedBy: utf8.endIndex),
                let value = UInt8(
                    String(decoding: utf8[utf8.index(after: index)..<end], as: UTF8.self), radix: 8)
            {
                bytes.append(value)
                index = end
                continue
            }
            bytes.append(byte)
            index = utf8.index(after: index)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
