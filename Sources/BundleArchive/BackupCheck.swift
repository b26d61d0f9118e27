import AppBundle
import AppdBase
import Foundation
import Glibc

/// What a restore checks once the extractor has taken the stream apart (the extractor already
/// refused traversal, absolute names, entries through links, devices, FIFOs, hard links,
/// setuid and world-writable files, duplicates and what is over the limits): the tree holds
/// only what a backup holds, the manifest is there and of a format this appd reads, and every
/// regular file's SHA-256, taken by the extractor as it wrote it, is the one `files.json`
/// lists, no more and no fewer files. Then `.appd-backup/` is removed, leaving the container.
///
/// Everything is read through fds opened without following a link: the archive made the tree.
public enum BackupCheck {
    public static func verify(extractedAt path: String, digests: [String: [UInt8]]) throws
        -> BackupManifest
    {
        let top = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard top >= 0 else { throw AppdError.system("open \(path)") }
        defer { close(top) }
        let folder = openat(
            top, BackupFormat.folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard folder >= 0 else {
            throw AppdError.backup(
                "it has no \(BackupFormat.manifestName); it is not an appd backup",
                hint: "a backup is what 'appd backup ID' wrote")
        }
        defer { close(folder) }
        let names = ["manifest.json", "files.json", "summary.json"]
        for name in try FileDescriptor.entryNames(folder, path: BackupFormat.folder)
        where !names.contains(name) {
            throw AppdError.backup(
                "'\(BackupFormat.folder)/\(Tar.shown(Array(name.utf8)))' is not part of a backup")
        }
        let manifest = try decode(BackupManifest.self, folder, "manifest.json")
        guard manifest.format == BackupFormat.version else {
            throw AppdError.backup(
                "its format is \(manifest.format); this appd reads format \(BackupFormat.version)",
                hint: "restore it with the appd that took it, or a newer one")
        }
        let groups = manifest.groups ?? []
        var allowed = Set(BackupFormat.included + [BackupFormat.folder])
        if !groups.isEmpty { allowed.insert(BackupFormat.groupsFolder) }
        for name in try FileDescriptor.entryNames(top, path: path) where !allowed.contains(name) {
            throw AppdError.backup(
                "'\(Tar.shown(Array(name.utf8)))' is not part of a backup (only \(BackupFormat.included.joined(separator: " and ")) are, and \(BackupFormat.groupsFolder) when the manifest names groups)"
            )
        }
        try checkExcluded(top, under: "")
        if !groups.isEmpty { try checkGroups(groups, top) }
        let listing = try decode(BackupFileList.self, folder, "files.json")
        try compare(listing, digests)
        for name in names { _ = unlinkat(folder, name, 0) }
        guard unlinkat(top, BackupFormat.folder, AT_REMOVEDIR) == 0 else {
            throw AppdError.system("remove \(path)/\(BackupFormat.folder)")
        }
        return manifest
    }

    /// Refuses what a backup never holds (`Library/Caches`) in the folder `under` of `top`.
    static func checkExcluded(_ top: Int32, under prefix: String) throws {
        var st = Glibc.stat()
        for excluded in BackupFormat.excluded
        where fstatat(top, prefix + excluded, &st, AT_SYMLINK_NOFOLLOW) == 0 {
            throw AppdError.backup(
                "it holds \(Tar.shown(Array((prefix + excluded).utf8))), which a backup never holds"
            )
        }
    }

    /// `AppGroups/` holds a folder for each group the manifest names and nothing else; the
    /// names are group ids by install's rule (`BundleIdentifier`, as SigningPolicy checks an
    /// app's groups: so one path component each), none twice in any case.
    static func checkGroups(_ groups: [String], _ top: Int32) throws {
        var seen = Set<String>()
        for id in groups {
            guard (try? BundleIdentifier(validating: id)) != nil,
                seen.insert(id.lowercased()).inserted
            else {
                throw AppdError.backup(
                    "its manifest names the group '\(Tar.shown(Array(id.utf8)))', which is not a group id or is named twice"
                )
            }
        }
        let folder = openat(
            top, BackupFormat.groupsFolder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard folder >= 0 else {
            throw AppdError.backup(
                "its manifest names groups, and it has no \(BackupFormat.groupsFolder) folder")
        }
        defer { close(folder) }
        let present = try FileDescriptor.entryNames(folder, path: BackupFormat.groupsFolder)
        for name in present where !groups.contains(name) {
            throw AppdError.backup(
                "'\(BackupFormat.groupsFolder)/\(Tar.shown(Array(name.utf8)))' is not a group its manifest names"
            )
        }
        for id in groups {
            let group = openat(folder, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard group >= 0 else {
                throw AppdError.backup(
                    "its manifest names the group \(id), and it has no folder \(BackupFormat.groupsFolder)/\(id)"
                )
            }
            close(group)
            try checkExcluded(top, under: "\(BackupFormat.groupsFolder)/\(id)/")
        }
    }

    /// Every file the extractor wrote (but the backup's own) against the listing.
    static func compare(_ listing: BackupFileList, _ digests: [String: [UInt8]]) throws {
        var listed: [String: String] = [:]
        for file in listing.files {
            guard listed.updateValue(file.sha256, forKey: file.path) == nil else {
                throw AppdError.backup(
                    "files.json lists '\(Tar.shown(Array(file.path.utf8)))' twice")
            }
        }
        var extracted = 0
        for (path, digest) in digests where !path.hasPrefix(BackupFormat.folder + "/") {
            extracted += 1
            let shown = Tar.shown(Array(path.utf8))
            guard let want = listed[path] else {
                throw AppdError.backup("'\(shown)' is in the archive but not in files.json")
            }
            guard want == ContentHasher.hex(digest) else {
                throw AppdError.backup(
                    "'\(shown)' does not match its SHA-256 in files.json (the archive was changed or damaged)"
                )
            }
        }
        guard extracted == listed.count else {
            let missing = listed.keys.first { digests[$0] == nil } ?? ""
            throw AppdError.backup(
                "files.json lists \(listed.count) files, the archive holds \(extracted) ('\(Tar.shown(Array(missing.utf8)))' is missing)"
            )
        }
    }

    static func decode<T: Decodable>(_ type: T.Type, _ folder: Int32, _ name: String) throws -> T {
        let shown = "\(BackupFormat.folder)/\(name)"
        let fd = openat(folder, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            throw AppdError.backup("it has no \(shown), or it is not a file")
        }
        defer { close(fd) }
        var st = Glibc.stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG,
            st.st_size <= BackupFormat.maxListingBytes
        else {
            throw AppdError.backup(
                "\(shown) is not a file of at most \(BackupFormat.maxListingBytes) bytes")
        }
        guard case .success(let bytes) = readAll(fd, limit: BackupFormat.maxListingBytes) else {
            throw AppdError.system("read \(shown)")
        }
        let data = Data(bytes)
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch {
            throw AppdError.backup("\(shown) is not what appd writes: \(error)")
        }
    }
}

extension FileDescriptor {
    /// The names in the directory `fd` (not `.`, `..`), as far as they are UTF-8; others are
    /// shown escaped, which no check accepts.
    static func entryNames(_ fd: Int32, path: String) throws -> [String] {
        let copy = dup(fd)
        guard copy >= 0, let dir = fdopendir(copy) else {
            if copy >= 0 { close(copy) }
            throw AppdError.system("read directory \(path)")
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let raw = directoryEntryName(entry)
            if raw == [46] || raw == [46, 46] { continue }
            names.append(String(validating: raw, as: UTF8.self) ?? Tar.shown(raw))
            if names.count > 64 { break }
        }
        return names
    }
}
