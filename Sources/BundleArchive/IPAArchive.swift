import AppBundle
import AppdBase
import Foundation
import ZIPFoundation

/// An `.ipa`, the way iOS apps travel: a zip archive holding `Payload/Name.app/`. The client
/// (`appd install Name.ipa`) reads it with ZIPFoundation and turns the app inside into the same
/// tar stream a folder becomes (docs/bundle-archive.md), so the daemon keeps one reader of
/// hostile archives, its tar extractor, and never parses zip (whose central directory, at the
/// end, would have to be spooled to disk before anything could be checked).
///
/// The zip is hostile input like a folder: `open` checks every entry before a byte is sent and
/// refuses zip bombs (declared sizes over the limits, compression ratios deflate cannot produce,
/// entries that inflate past their declared size), absolute names, `..` and empty components,
/// symlinks that lead out of the app, duplicate names, encrypted entries, and any layout but
/// exactly one `Payload/Name.app`. What lies outside `Payload/` (`iTunesMetadata.plist`,
/// `META-INF/`, `SwiftSupport/`, `Symbols/`) is not part of the app and is skipped.
public struct IPAArchive {
    /// The app folder's name, `Name.app`.
    public let appName: String
    /// Regular files of the app, and their declared bytes: what a progress display counts to.
    public let fileCount: Int
    public let totalBytes: Int64

    let archive: Archive
    let entries: [Item]
    /// The path as the user gave it, for messages.
    let shown: String

    struct Item {
        let entry: Entry
        /// Relative to the app folder; empty for the folder itself.
        let path: String
        let type: Entry.EntryType
        let mode: mode_t
        let size: Int64
        let link: [UInt8]
    }

    /// Deflate cannot expand data more than about 1032 times; a larger declared ratio is a lie
    /// about one of the two sizes.
    public static let maxCompressionRatio: UInt64 = 1100

    /// Reads the central directory of the zip at `path` and checks it; `shown` names it in
    /// every message (the path as the user typed it).
    public static func open(at path: String, shownAs shown: String, limits: BundleLimits) throws
        -> IPAArchive
    {
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT { throw AppdError(.notFound, "\(shown): no such file") }
            throw AppdError.system("stat \(shown)")
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw AppdError(
                .invalidBundle, "\(shown) is not a regular file; an .ipa is a zip archive")
        }
        guard access(path, R_OK) == 0 else {
            throw AppdError(
                .permissionDenied, "cannot read \(shown): \(errnoName(errno))",
                hint: "the archive is read with your permissions")
        }
        let archive: Archive
        do {
            archive = try Archive(url: URL(fileURLWithPath: path), accessMode: .read)
        } catch {
            throw AppdError(
                .invalidBundle, "\(shown) is not a zip archive (\(error))",
                hint: "an .ipa is a zip holding Payload/Name.app")
        }
        // ZIPFoundation's iteration ends without a word at an entry it cannot read (an encrypted
        // one, a corrupt record): what it lists is compared with what the archive declares.
        guard let declared = declaredEntryCount(archive) else {
            throw AppdError(
                .invalidBundle, "\(shown): cannot tell how many entries the zip declares")
        }
        guard declared <= UInt64(limits.maxFiles + 16) else {
            throw AppdError(
                .invalidBundle,
                "\(shown) declares \(declared) entries, over \(limits.maxFiles) (MaxFiles)")
        }
        var reader = Reader(shown: shown, limits: limits)
        for entry in archive {
            try reader.take(entry, from: archive)
        }
        guard UInt64(reader.entryCount) == declared else {
            throw AppdError(
                .invalidBundle,
                "\(shown): entry \(reader.entryCount + 1) of \(declared) is encrypted or its central directory is corrupt; appd installs only plain, whole archives",
                hint: "an .ipa is a zip holding Payload/Name.app")
        }
        return try reader.finish(archive)
    }

    /// Writes the app as a bundle archive (tar of the folder's contents) to `sink`, each file
    /// checked against its declared size and CRC as it is inflated. `onFile` is called after
    /// each regular file with its size.
    public func write(
        onFile: ((Int64) -> Void)? = nil, to sink: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        try withoutActuallyEscaping(sink) { sink in
            try write(onFile: onFile, output: TarOutput(sink: sink))
        }
    }

    private func write(onFile: ((Int64) -> Void)?, output: TarOutput) throws {
        for item in entries {
            switch item.type {
            case .directory:
                guard !item.path.isEmpty else { continue }
                try output.header(
                    item.path + "/", mode: item.mode, size: 0, type: Tar.EntryType.directory)
            case .symlink:
                try output.header(
                    item.path, mode: 0o777, size: 0, type: Tar.EntryType.symlink,
                    link: item.link[...])
            case .file:
                try output.header(
                    item.path, mode: item.mode, size: item.size, type: Tar.EntryType.regular)
                var written: Int64 = 0
                let what = "\(shown): Payload/\(appName)/\(item.path)"
                let checksum: CRC32
                do {
                    // ZIPFoundation computes the CRC but leaves comparing it to the caller.
                    checksum = try archive.extract(item.entry, bufferSize: 64 << 10) { data in
                        // A bomb that inflates past what it declared stops here, at the size the
                        // header already promised.
                        guard Int64(data.count) <= item.size - written else {
                            throw AppdError(
                                .invalidBundle,
                                "\(what) inflates to more than the \(item.size) bytes it declares; refusing a zip bomb"
                            )
                        }
                        written += Int64(data.count)
                        try data.withUnsafeBytes { try output.append($0) }
                    }
                } catch let error as AppdError {
                    throw error
                } catch {
                    throw AppdError(.invalidBundle, "\(what) cannot be read: \(error)")
                }
                guard written == item.size else {
                    throw AppdError(
                        .invalidBundle,
                        "\(what) holds \(written) bytes but declares \(item.size)")
                }
                guard checksum == item.entry.checksum else {
                    throw AppdError(
                        .invalidBundle, "\(what): its CRC does not match; the archive is corrupt")
                }
                try output.append(zeros: Tar.padding(for: item.size))
                onFile?(item.size)
            }
        }
        try output.append(zeros: 2 * Tar.blockSize)
        try output.flush()
    }
}

extension IPAArchive {
    /// Checks entries one at a time, as the central directory lists them.
    struct Reader {
        let shown: String
        let limits: BundleLimits
        var apps: [String] = []
        var items: [Item] = []
        var seen: Set<String> = []
        var entryCount = 0
        var fileCount = 0
        var totalBytes: Int64 = 0

        init(shown: String, limits: BundleLimits) {
            self.shown = shown
            self.limits = limits
        }

        func refuse(_ name: String, _ problem: String) -> AppdError {
            AppdError(
                .invalidBundle,
                "\(shown): entry '\(Tar.shown(Array(name.utf8.prefix(300))))' \(problem)",
                hint: "an .ipa is a zip holding Payload/Name.app and nothing hostile")
        }

        mutating func take(_ entry: Entry, from archive: Archive) throws {
            let name = entry.path
            entryCount += 1
            // Everything counts, inside Payload/ or not: a directory of millions of entries is
            // refused before they are all read.
            guard entryCount <= limits.maxFiles + 16 else {
                throw AppdError(
                    .invalidBundle,
                    "\(shown) holds more than \(limits.maxFiles) entries (MaxFiles)")
            }
            if IPAArchive.isEncrypted(entry) {
                throw refuse(name, "is encrypted; appd installs only plain archives")
            }
            let bytes = Array(name.utf8)
            guard !bytes.contains(0) else { throw refuse(name, "has a NUL byte in its name") }
            guard bytes.first != UInt8(ascii: "/") else {
                throw refuse(name, "is an absolute path")
            }
            guard !bytes.contains(UInt8(ascii: "\\")) else {
                throw refuse(name, "has a backslash in its name (a Windows path?)")
            }
            var trimmed = name
            if entry.type == .directory, trimmed.hasSuffix("/") { trimmed.removeLast() }
            let parts = trimmed.split(separator: "/", omittingEmptySubsequences: false)
            for part in parts {
                if part.isEmpty { throw refuse(name, "has an empty path component") }
                if part == ".." { throw refuse(name, "has a '..' component") }
                if part == "." { throw refuse(name, "has a '.' component") }
            }
            guard parts.first == "Payload" else { return }  // iTunesMetadata.plist, META-INF/, ...
            guard parts.count >= 2 else { return }  // Payload/ itself
            let app = String(parts[1])
            guard app.hasSuffix(".app"), app.count > 4, !app.hasPrefix(".") else {
                throw refuse(name, "is in Payload/ but not in a Name.app folder")
            }
            if !apps.contains(app) {
                apps.append(app)
                guard apps.count == 1 else {
                    throw AppdError(
                        .invalidBundle,
                        "\(shown) holds more than one app (Payload/\(apps[0]) and Payload/\(app)); an .ipa holds exactly one",
                        hint: "install each app from an .ipa of its own")
                }
            }
            if parts.count == 2 && entry.type != .directory {
                throw refuse(name, "is where the app folder should be, and is not a directory")
            }
            let path = parts.dropFirst(2).joined(separator: "/")
            guard seen.insert(path).inserted else {
                throw refuse(name, "appears twice in the archive")
            }

            let size = entry.uncompressedSize
            let stored = entry.compressedSize
            guard let size64 = Int64(exactly: size), size64 <= limits.maxTotalBytes - totalBytes
            else {
                throw refuse(
                    name,
                    "declares \(size) bytes, bringing the app past \(limits.maxTotalBytes) bytes (MaxTotalBytes); refusing a zip bomb"
                )
            }
            if entry.isCompressed {
                guard
                    size <= 4096 || (stored > 0 && size / stored <= IPAArchive.maxCompressionRatio)
                else {
                    throw refuse(
                        name,
                        "declares \(size) bytes from \(stored) compressed, a ratio deflate cannot produce; refusing a zip bomb"
                    )
                }
            } else if size != stored {
                throw refuse(
                    name, "is stored uncompressed but declares \(size) bytes from \(stored)")
            }
            let mode = IPAArchive.mode(of: entry)
            switch entry.type {
            case .directory:
                items.append(
                    Item(entry: entry, path: path, type: .directory, mode: mode, size: 0, link: []))
            case .file:
                fileCount += 1
                totalBytes += size64
                items.append(
                    Item(entry: entry, path: path, type: .file, mode: mode, size: size64, link: []))
            case .symlink:
                let target = try IPAArchive.linkTarget(entry, size: size64, in: archive) {
                    refuse(name, $0)
                }
                try checkLink(name, path: path, target: target)
                items.append(
                    Item(
                        entry: entry, path: path, type: .symlink, mode: 0o777, size: 0, link: target
                    ))
            }
        }

        /// A link must stay inside the app, judged on its text: the daemon's walker judges it
        /// again on the installed tree.
        func checkLink(_ name: String, path: String, target: [UInt8]) throws {
            guard !target.contains(0), let text = String(validating: target, as: UTF8.self) else {
                throw refuse(name, "is a symlink whose target holds a NUL or is not UTF-8")
            }
            guard !text.hasPrefix("/") else {
                throw refuse(
                    name,
                    "is a symlink to the absolute path \(text); links must stay inside the app")
            }
            var depth = path.split(separator: "/").count - 1
            for part in text.split(separator: "/") {
                if part == ".." {
                    depth -= 1
                    guard depth >= 0 else {
                        throw refuse(name, "is a symlink to \(text), which leads out of the app")
                    }
                } else if part != "." {
                    depth += 1
                }
            }
        }

        func finish(_ archive: Archive) throws -> IPAArchive {
            guard let app = apps.first else {
                throw AppdError(
                    .invalidBundle, "\(shown) holds no Payload/Name.app folder",
                    hint:
                        "an .ipa is a zip holding Payload/Name.app; to install a folder, name the folder"
                )
            }
            guard items.contains(where: { $0.type == .file }) else {
                throw AppdError(.invalidBundle, "\(shown): Payload/\(app) holds no files")
            }
            return IPAArchive(
                appName: app, fileCount: fileCount, totalBytes: totalBytes, archive: archive,
                entries: items, shown: shown)
        }
    }

    /// Bit 0 of the general purpose flags. ZIPFoundation reads it but keeps it internal; its
    /// stored properties are reached by reflection (the version is pinned in Package.swift, and
    /// IPAArchiveTests (BundleArchiveTests) prove this still sees an encrypted entry).
    static func isEncrypted(_ entry: Entry) -> Bool {
        for structure in ["centralDirectoryStructure", "localFileHeader"] {
            guard
                let header = Mirror(reflecting: entry).children.first(where: {
                    $0.label == structure
                })?.value,
                let flags = Mirror(reflecting: header).children.first(where: {
                    $0.label == "generalPurposeBitFlag"
                })?.value as? UInt16
            else { return true }  // cannot tell: refuse rather than guess
            if flags & 1 != 0 { return true }
        }
        return false
    }

    /// A symlink's target. ZIPFoundation hands over a link's stored bytes as they are, read in
    /// one piece of the size its local header declares (a forged size would allocate
    /// gigabytes), without inflating them: both sizes are checked first, and a deflated target
    /// is inflated here, bounded by its declared size, and checked against the entry's CRC.
    static func linkTarget(
        _ entry: Entry, size: Int64, in archive: Archive, refuse: (String) -> AppdError
    ) throws -> [UInt8] {
        let stored = entry.compressedSize
        let local = localHeaderSize(entry)
        guard size > 0, size < Int64(PATH_MAX), stored <= UInt64(PATH_MAX) + 64, local == stored
        else {
            throw refuse(
                "is a symlink whose target declares \(size) bytes (\(stored) stored, \(local.map(String.init) ?? "unknown") in its local header)"
            )
        }
        var raw = Data()
        var target: [UInt8] = []
        do {
            _ = try archive.extract(entry, bufferSize: Int(PATH_MAX), skipCRC32: true) {
                raw.append($0)
            }
            let checksum: CRC32
            if entry.isCompressed {
                checksum = try Data.decompress(
                    size: Int64(raw.count), bufferSize: 4096, skipCRC32: false,
                    provider: { position, count in
                        let start = raw.startIndex + Int(position)
                        return raw.subdata(in: start..<min(raw.endIndex, start + count))
                    },
                    consumer: { data in
                        guard target.count + data.count <= Int(size) else {
                            throw AppdError(.invalidBundle, "inflates past its declared size")
                        }
                        target += data
                    })
            } else {
                target = Array(raw)
                checksum = raw.crc32(checksum: 0)
            }
            guard checksum == entry.checksum else {
                throw AppdError(.invalidBundle, "its CRC does not match")
            }
        } catch {
            throw refuse(
                "is a symlink whose target cannot be read: \((error as? AppdError)?.message ?? "\(error)")"
            )
        }
        guard target.count == Int(size) else {
            throw refuse(
                "is a symlink whose target holds \(target.count) bytes but declares \(size)")
        }
        return target
    }

    /// The number of entries the end of central directory record (or its ZIP64 form) declares,
    /// reached by reflection like `isEncrypted`'s flags.
    static func declaredEntryCount(_ archive: Archive) -> UInt64? {
        func child(_ value: Any, _ label: String) -> Any? {
            Mirror(reflecting: value).children.first { $0.label == label }?.value
        }
        guard let zip64 = child(archive, "zip64EndOfCentralDirectory") else { return nil }
        if let some = Mirror(reflecting: zip64).children.first?.value {  // Optional's `some`
            return child(child(some, "record") as Any, "totalNumberOfEntriesInCentralDirectory")
                as? UInt64
        }
        guard let record = child(archive, "endOfCentralDirectoryRecord"),
            let count = child(record, "totalNumberOfEntriesInCentralDirectory") as? UInt16
        else { return nil }
        return UInt64(count)
    }

    /// The compressed size the entry's local header declares (what ZIPFoundation reads a
    /// symlink's target by), reached like `isEncrypted`'s flags.
    static func localHeaderSize(_ entry: Entry) -> UInt64? {
        guard
            let header = Mirror(reflecting: entry).children.first(where: {
                $0.label == "localFileHeader"
            })?.value,
            let size = Mirror(reflecting: header).children.first(where: {
                $0.label == "compressedSize"
            })?.value
                as? UInt32
        else { return nil }
        return UInt64(size)
    }

    /// The Unix permission bits the zip recorded (upper half of the external attributes when it
    /// was made on Unix or macOS); 0644/0755 when it was made elsewhere.
    static func mode(of entry: Entry) -> mode_t {
        let fallback: mode_t = entry.type == .directory ? 0o755 : 0o644
        let value = entry.fileAttributes[.posixPermissions]
        guard let raw = (value as? NSNumber)?.int64Value ?? (value as? UInt16).map(Int64.init)
        else {
            return fallback
        }
        let bits = mode_t(truncatingIfNeeded: raw) & 0o7777
        return bits == 0 ? fallback : bits
    }
}
