import AppBundle
import AppdBase
import CLinux
import Glibc

/// What a host (this one, or another's filesystem at a root folder) offers a bundle's
/// programs: a loader, libraries where the loader looks, and the interpreters of scripts.
///
/// Libraries are found as glibc's loader finds them, after the program's own RUNPATH: the
/// entries of the root's `/etc/ld.so.cache` (what `ldconfig` made of `ld.so.conf`), then the
/// default directories. A file counts only when it lies beneath a path the sandbox shows an
/// app (`[Sandbox] SystemPaths`, `/lib*`, `/bin`, `/sbin`): a library the app cannot see is
/// one it does not have. An ELF file must also be of the program's class and machine, as the
/// loader skips one that is not.
///
/// Every file is opened with openat2's RESOLVE_IN_ROOT beneath the root, so another host's
/// absolute symlinks (`/lib -> usr/lib`) resolve inside its tree. Bounds: the cache is read
/// only up to 16 MiB and 200,000 entries, each string up to 4 KiB; anything past or malformed
/// is not used (the default directories are still searched).
public final class HostLibraries: ProgramHost {
    public let root: String
    public let architecture: String
    let visiblePaths: [String]
    private let rootFD: Int32
    private var cacheBytes: [UInt8]?
    private var cached: [String: [String]] = [:]
    private var files: [String: ELFIdentity?] = [:]

    public static let maxCacheBytes = 16 << 20
    public static let maxCacheEntries = 200_000

    /// Paths apps see beside `[Sandbox] SystemPaths` (SandboxPolicy adds them as the host has
    /// them).
    public static let alwaysVisible = ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]

    /// The host at `root` ("/" for this one), as apps see it with `systemPaths`. Another
    /// root's architecture is that of its `/bin/sh`.
    public init(root: String = "/", systemPaths: [String]) throws {
        let fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw AppdError.system("open \(root)") }
        self.root = root
        rootFD = fd
        visiblePaths = (systemPaths + Self.alwaysVisible).map { path in
            var path = path
            while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
            return path
        }
        if root == "/" {
            architecture = ELFMachine.hostArchitecture
        } else {
            architecture =
                Self.identity(rootFD, "/bin/sh").flatMap {
                    ELFMachine.architecture(
                        machine: $0.machine, elfClass: $0.elfClass, bigEndian: $0.bigEndian)
                } ?? "unknown"
        }
    }

    deinit { close(rootFD) }

    /// "this host", or "the host at DIR".
    public var name: String { root == "/" ? "this host" : "the host at \(root)" }

    public func hasFile(_ path: String, elfClass: ELFFile.Class?, machine: UInt16?) -> Bool {
        guard path.hasPrefix("/"), isVisible(path) else { return false }
        guard let elfClass, let machine else { return isRegularFile(path) }
        guard let found = identity(path) else { return false }
        return found.elfClass == elfClass && found.machine == machine
    }

    public func library(
        _ name: String, elfClass: ELFFile.Class, machine: UInt16, in directories: [String]?
    ) -> String? {
        guard !name.contains("/"), !name.isEmpty else { return nil }
        let candidates: [String]
        if let directories {
            candidates = directories.map { "\($0)/\(name)" }
        } else {
            candidates =
                cachePaths(name)
                + Self.defaultDirectories(machine: machine, elfClass: elfClass).map {
                    "\($0)/\(name)"
                }
        }
        return candidates.first { hasFile($0, elfClass: elfClass, machine: machine) }
    }

    /// glibc's built-in directories, the multiarch ones Debian's ld.so.conf adds first (a
    /// root without a cache still has them).
    static func defaultDirectories(machine: UInt16, elfClass: ELFFile.Class) -> [String] {
        let triple: String? =
            switch (machine, elfClass) {
            case (62, .elf64): "x86_64-linux-gnu"
            case (183, .elf64): "aarch64-linux-gnu"
            case (3, .elf32): "i386-linux-gnu"
            case (40, .elf32): "arm-linux-gnueabihf"
            case (243, .elf64): "riscv64-linux-gnu"
            case (21, .elf64): "powerpc64le-linux-gnu"
            case (22, .elf64): "s390x-linux-gnu"
            default: nil
            }
        let multiarch = triple.map { ["/lib/\($0)", "/usr/lib/\($0)"] } ?? []
        let wide = elfClass == .elf64 ? ["/lib64", "/usr/lib64"] : []
        return multiarch + wide + ["/lib", "/usr/lib"]
    }

    func isVisible(_ path: String) -> Bool {
        guard !path.split(separator: "/").contains("..") else { return false }
        return visiblePaths.contains { path == $0 || path.hasPrefix($0 == "/" ? "/" : $0 + "/") }
    }

    private func isRegularFile(_ path: String) -> Bool {
        let fd = appd_open_in_root(rootFD, path)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var info = stat()
        return fstat(fd, &info) == 0 && info.st_mode & S_IFMT == S_IFREG
    }

    private func identity(_ path: String) -> ELFIdentity? {
        if let known = files[path] { return known }
        let found = Self.identity(rootFD, path)
        files[path] = found
        return found
    }

    /// The class, byte order and machine of the regular file at `path` beneath `rootFD` (its
    /// first 20 bytes: the host's own libraries are the host's, and only whether the loader
    /// would take them matters), nil if it is no ELF file.
    static func identity(_ rootFD: Int32, _ path: String) -> ELFIdentity? {
        let fd = appd_open_in_root(rootFD, path)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        var head = [UInt8](repeating: 0, count: 20)
        let n = head.withUnsafeMutableBytes { raw in
            retryingInterrupts { pread(fd, raw.baseAddress, raw.count, 0) }
        }
        guard n == 20, ELFFile.hasMagic(head), head[4] == 1 || head[4] == 2,
            head[5] == 1 || head[5] == 2
        else { return nil }
        let bigEndian = head[5] == 2
        let machine =
            bigEndian
            ? UInt16(head[18]) << 8 | UInt16(head[19]) : UInt16(head[19]) << 8 | UInt16(head[18])
        return ELFIdentity(
            elfClass: head[4] == 2 ? .elf64 : .elf32, bigEndian: bigEndian, machine: machine)
    }

    /// The cache's paths for `name`, the file read once: only the entries of that name are
    /// decoded (a cache holds a thousand; a program needs a dozen).
    private func cachePaths(_ name: String) -> [String] {
        if let known = cached[name] { return known }
        if cacheBytes == nil { cacheBytes = readCache() ?? [] }
        let paths = Self.parseCache(cacheBytes ?? [], only: name)[name] ?? []
        cached[name] = paths
        return paths
    }

    private func readCache() -> [UInt8]? {
        let fd = appd_open_in_root(rootFD, "/etc/ld.so.cache")
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG,
            info.st_size > 0, info.st_size <= Self.maxCacheBytes
        else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { raw in
                retryingInterrupts {
                    pread(fd, raw.baseAddress! + done, raw.count - done, off_t(done))
                }
            }
            guard n > 0 else { return nil }
            done += n
        }
        return bytes
    }

    /// glibc's ld.so.cache (the "glibc-ld.so.cache1.1" format, after the old "ld.so-1.7.0"
    /// table when a cache has both): library name → paths, in the cache's order; with `only`,
    /// that name's entries alone. Malformed entries are skipped; a malformed header gives an
    /// empty cache.
    static func parseCache(_ bytes: [UInt8], only wanted: String? = nil) -> [String: [String]] {
        let wantedKey = wanted.map { Array($0.utf8) + [0] }
        func u32(_ at: Int) -> Int? {
            guard at >= 0, at + 4 <= bytes.count else { return nil }
            return Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16
                | Int(bytes[at + 3]) << 24
        }
        let oldMagic = Array("ld.so-1.7.0".utf8)
        let newMagic = Array("glibc-ld.so.cache1.1".utf8)
        var start = 0
        if bytes.starts(with: oldMagic) {
            guard let count = u32(12), count <= maxCacheEntries else { return [:] }
            start = (16 + count * 12 + 7) & ~7
        }
        guard start + 48 <= bytes.count, bytes[start...].starts(with: newMagic),
            let count = u32(start + 20), count <= maxCacheEntries,
            start + 48 + count * 24 <= bytes.count
        else { return [:] }
        // Offsets of the new format count from its header.
        func string(_ offset: Int) -> String? {
            let begin = start + offset
            guard offset > 0, begin < bytes.count else { return nil }
            let end = min(bytes.count, begin + 4096)
            guard let nul = bytes[begin..<end].firstIndex(of: 0) else { return nil }
            return String(validating: bytes[begin..<nul], as: UTF8.self)
        }
        var libraries: [String: [String]] = [:]
        for index in 0..<count {
            let entry = start + 48 + index * 24
            guard let keyOffset = u32(entry + 4), let valueOffset = u32(entry + 8) else {
                continue
            }
            if let wantedKey {
                let begin = start + keyOffset
                guard keyOffset > 0, begin < bytes.count,
                    bytes[begin..<min(bytes.count, begin + wantedKey.count)].elementsEqual(
                        wantedKey)
                else { continue }
            }
            guard let key = string(keyOffset), let value = string(valueOffset), value.hasPrefix("/")
            else { continue }
            libraries[key, default: []].append(value)
        }
        return libraries
    }
}

/// What the loader checks of a library before it takes it.
struct ELFIdentity: Equatable {
    var elfClass: ELFFile.Class
    var bigEndian: Bool
    var machine: UInt16
}
