import AppdBase
import CLinux
import Foundation
import Glibc
import PrintableText
import Sandbox

/// The pod's name service files and hostname (docs/oci-runtime.md, "The pod's DNS and
/// hostname"). An engine hands a container its pod's `/etc/resolv.conf` (a `dnsConfig`, the
/// cluster's DNS service), `/etc/hosts` and `/etc/hostname` as bind mounts of files it wrote,
/// and the pod's hostname as config.json's `hostname`. Those three destinations, exactly, are
/// bound read-only for an app and a plain container alike; nothing else of the host is.
///
/// The source is the config's, so it is judged before it is used: a regular file of at most
/// 64 KiB whose text has the shape of the file it stands for (resolv.conf keywords; hosts lines
/// of an address and names; one hostname). A config that points `/etc/hosts` at the host's
/// `/etc/shadow` is refused at create, naming the line; the app never reads a host file through
/// one of these names. The file is opened once (HostPaths: never appd's own state), its text
/// read through that fd, and the mount made from the same fd (MountPins), so a file swapped in
/// after the check changes nothing.
enum PodFiles {
    struct File {
        var destination: String
        /// The source, opened once (HostPaths): its text is checked through this fd and the
        /// mount is made from it (MountPins), so a file swapped in after the check changes
        /// nothing.
        var opened: HostPaths.Opened
        /// How the profile names it (the fd, until MountPins points it at its pin).
        var source: String { opened.source }
    }

    static let destinations = ["/etc/resolv.conf", "/etc/hosts", "/etc/hostname"]
    /// Bounds a pod's file: Kubernetes' resolv.conf has at most 32 search domains of 256 bytes.
    static let maximumBytes = 64 << 10
    /// HOST_NAME_MAX.
    static let maximumHostname = 64

    /// The config's bind mounts at the three destinations, each checked (the last one wins
    /// when a destination is given twice, as the mounts would stack).
    /// Each is open until the caller closes it (`PreparedSandbox.held`).
    static func files(in spec: OCISpec, stateRoot: String) throws -> [File] {
        var found: [String: File] = [:]
        do {
            for mount in spec.mounts ?? [] where mount.isBind {
                let destination = OCIConfigCheck.normalized(mount.destination)
                guard destinations.contains(destination), let source = mount.source else {
                    continue
                }
                found[destination]?.opened.close()
                found[destination] = try check(source, for: destination, stateRoot: stateRoot)
            }
        } catch {
            for file in found.values { file.opened.close() }
            throw error
        }
        return destinations.compactMap { found[$0] }
    }

    /// config.json's `hostname`, checked: at most 64 bytes of letters, digits, `-` and `.`,
    /// not starting with `-` or `.`. Without one, the name in the pod's `/etc/hostname`
    /// (`files`, checked): containerd's CRI gives `hostname` to the pod's sandbox container
    /// only, and its other containers join that container's uts namespace by path, which
    /// appd-oci joins for a plain container only (the launcher sets no hostname in a joined
    /// namespace), not for an app. nil when neither names one.
    static func hostname(in spec: OCISpec, files: [File] = []) throws -> String? {
        guard let name = spec.hostname, !name.isEmpty else {
            guard let file = files.first(where: { $0.destination == "/etc/hostname" }),
                let text = try? String(
                    contentsOfFile: "/proc/self/fd/\(file.opened.fd)", encoding: .utf8)
            else { return nil }
            let name = text.split(whereSeparator: { $0.isWhitespace }).first.map(String.init)
            return name.flatMap { isHostname($0) ? $0 : nil }
        }
        guard isHostname(name) else {
            throw AppdError(
                .invalidConfig,
                "config.json's hostname '\(Printable(name, limit: 80))' is not a hostname (at most \(maximumHostname) letters, digits, '-' and '.')"
            )
        }
        return name
    }

    static func isHostname(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumHostname, bytes[0] != UInt8(ascii: "-"),
            bytes[0] != UInt8(ascii: ".")
        else { return false }
        return bytes.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A)
                || (byte >= 0x61 && byte <= 0x7A) || byte == UInt8(ascii: "-")
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
        }
    }

    /// An app's profile with the pod's files in place of the sandbox's own (its generated
    /// hosts and hostname, the node's resolv.conf) and the pod's hostname in its uts namespace.
    static func apply(_ files: [File], hostname: String?, to profile: inout SandboxProfile) {
        if let hostname, profile.namespaces.contains(.uts) {
            profile.hostname = hostname
            for index in profile.mounts.indices where profile.mounts[index].kind == .file {
                switch profile.mounts[index].destination {
                case "/etc/hostname": profile.mounts[index].content = hostname + "\n"
                case "/etc/hosts":
                    profile.mounts[index].content =
                        "127.0.0.1 localhost \(hostname)\n::1 localhost ip6-localhost ip6-loopback\n"
                default: continue
                }
            }
        }
        for file in files {
            var bind = SandboxProfile.Mount.roBind(file.source)
            bind.destination = file.destination
            if let at = profile.mounts.firstIndex(where: { $0.destination == file.destination }) {
                profile.mounts.removeAll { $0.destination == file.destination }
                profile.mounts.insert(bind, at: min(at, profile.mounts.count))
            } else if let etc = profile.mounts.firstIndex(where: { $0.destination == "/etc" }) {
                profile.mounts.insert(bind, at: etc + 1)
            }
        }
    }

    /// Makes an empty file at each destination the image lacks, as runc makes a mount point in
    /// the rootfs: beneath `rootfs` without following a link (an image's `/etc` that is a link
    /// out of it gets nothing), owned by the host's root. A plain container's `/etc` may be
    /// bound read-only from the image, where the launcher could not make one.
    static func makeMountPoints(_ files: [File], in rootfs: String, log: OCILog) {
        guard !files.isEmpty else { return }
        let root = open(rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else { return }
        defer { close(root) }
        for file in files {
            let relative = String(file.destination.dropFirst())
            let fd = appd_open_beneath(root, relative, O_RDONLY | O_CREAT, 0o644)
            if fd >= 0 {
                close(fd)
            } else {
                log.warning(
                    "the image's \(file.destination) cannot be made a mount point (\(errnoText(errno))); the pod's file is not mounted"
                )
            }
        }
    }

    private static func check(_ path: String, for destination: String, stateRoot: String)
        throws -> File
    {
        func refuse(_ why: String) -> AppdError {
            AppdError(
                .permissionDenied,
                "config.json binds \(Printable(path)) at \(destination), which \(why)",
                hint: "only the engine's own \(destination) for the pod is mounted there")
        }
        // Never appd's own state; the host's files are judged by their text below.
        let opened = try HostPaths.open(
            path, what: "the pod's \(destination)", stateRoot: stateRoot, system: false)
        var keep = false
        defer { if !keep { opened.close() } }
        // Read through the opened file itself (its O_PATH fd, reopened for reading).
        let fd = open("/proc/self/fd/\(opened.fd)", O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw refuse("cannot be opened (\(errnoText(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw refuse("is not a regular file")
        }
        guard info.st_size <= maximumBytes else {
            throw refuse("is larger than \(maximumBytes) bytes")
        }
        var bytes = [UInt8](repeating: 0, count: maximumBytes + 1)
        var count = 0
        while count < bytes.count {
            let got = bytes.withUnsafeMutableBytes {
                read(fd, $0.baseAddress! + count, $0.count - count)
            }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { break }
            count += got
        }
        guard count <= maximumBytes else { throw refuse("is larger than \(maximumBytes) bytes") }
        if let line = firstForeignLine(Array(bytes.prefix(count)), as: destination) {
            throw refuse("is not a \(destination.dropFirst(5)) file (line \(line))")
        }
        keep = true
        return File(destination: destination, opened: opened)
    }

    /// The number of the first line that the file at `destination` could not hold, or nil.
    static func firstForeignLine(_ bytes: [UInt8], as destination: String) -> Int? {
        guard !bytes.contains(0), let text = String(validating: bytes, as: UTF8.self) else {
            return 1
        }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        if destination == "/etc/hostname" {
            let names = lines.map { $0.trimmingSpaces }.filter { !$0.isEmpty }
            guard names.count <= 1 else { return 2 }
            return names.first.map { isHostname(String($0)) ? nil : 1 } ?? nil
        }
        for (index, raw) in lines.enumerated() {
            let line = raw.trimmingSpaces
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            let ok: Bool
            if destination == "/etc/resolv.conf" {
                ok = ["nameserver", "search", "domain", "options", "sortlist"].contains(
                    String(fields[0]))
            } else {
                let names = fields.dropFirst().prefix { !$0.hasPrefix("#") }
                ok =
                    isAddress(String(fields[0])) && !names.isEmpty
                    && names.allSatisfy { isHostname(String($0)) }
            }
            if !ok { return index + 1 }
        }
        return nil
    }

    /// An IPv4 or IPv6 address (an IPv6 one may carry a `%zone`).
    static func isAddress(_ text: String) -> Bool {
        let address = text.split(separator: "%", maxSplits: 1).first.map(String.init) ?? ""
        var buffer = [UInt8](repeating: 0, count: 16)
        return inet_pton(AF_INET, address, &buffer) == 1
            || inet_pton(AF_INET6, address, &buffer) == 1
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" || first == "\r" {
            text = text.dropFirst()
        }
        while let last = text.last, last == " " || last == "\t" || last == "\r" {
            text = text.dropLast()
        }
        return text
    }
}
