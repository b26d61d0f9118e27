import AppdBase
import Crypto
import Foundation
import Glibc

/// What goes into an image besides the bundle's files.
public struct ImageDescription: Sendable {
    /// The folder at the root of the image (`Name.app`).
    public var bundleFolder: String
    /// The executable relative to the bundle (`Name`, `Contents/MacOS/Name`): the entrypoint is
    /// `/<bundleFolder>/<executable>`.
    public var executable: String
    public var reference: ImageReference
    /// `org.appd.*` labels of the image config.
    public var labels: [String: String]

    public init(
        bundleFolder: String, executable: String, reference: ImageReference,
        labels: [String: String]
    ) {
        self.bundleFolder = bundleFolder
        self.executable = executable
        self.reference = reference
        self.labels = labels
    }

    public var entrypoint: String { "/\(bundleFolder)/\(executable)" }
}

/// Writes a one-layer docker-archive (the `docker save` layout that `docker load`, `podman
/// load` and `ctr images import` all take) holding a bundle at `/Name.app`. The layout is
/// docs/oci-image.md's, the same scripts/oci/image.py writes, entry for entry.
///
/// Reproducible: the layer is BundleArchiveWriter's stream (sorted, owners 0, times 0), the
/// JSON has sorted keys, the archive's own entries are 0:0 with time 0; so the config digest,
/// the image ID every engine prints, is a function of the bundle and the description alone.
/// Atomic: the archive is written to a temporary file beside `output` and renamed over it, and
/// on any error nothing is left at `output`.
public enum ImageArchive {
    /// The sha256 digests of what was written, in lower-case hex.
    public struct Written: Sendable {
        public var configDigest: String
        public var layerDigest: String
    }

    /// The fixed creation time: the epoch, so two runs agree.
    static let created = "1970-01-01T00:00:00Z"
    static let path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

    public static func writeDocker(
        bundleAt bundle: String, description: ImageDescription, to output: String,
        onFile: ((Int64) -> Void)? = nil
    ) throws -> Written {
        let directory = (output as NSString).deletingLastPathComponent
        let base = (output as NSString).lastPathComponent
        // The layer first, to a file with no name: its digest and size head the archive.
        let layer = try temporaryFile(in: directory.isEmpty ? "." : directory, named: base)
        unlink(layer.path)
        defer { close(layer.fd) }
        var layerHash = SHA256()
        try BundleArchiveWriter.write(
            bundleAt: bundle, under: description.bundleFolder, onFile: onFile
        ) { bytes in
            layerHash.update(bufferPointer: bytes)
            if case .failure(let error) = writeAll(layer.fd, bytes) {
                throw AppdError.system("write the image layer", errno: error.rawValue)
            }
        }
        let layerDigest = hex(layerHash.finalize())
        let layerSize = Int64(lseek(layer.fd, 0, SEEK_END))
        guard layerSize >= 0, lseek(layer.fd, 0, SEEK_SET) == 0 else {
            throw AppdError.system("seek in the image layer")
        }

        let config = try json(
            ImageConfig(
                architecture: hostArchitecture, os: "linux", created: created,
                config: .init(
                    Env: [path], Entrypoint: [description.entrypoint], Labels: description.labels,
                    WorkingDir: "/"),
                rootfs: .init(type: "layers", diff_ids: ["sha256:\(layerDigest)"]),
                history: [.init(created: created, created_by: "appd image")]))
        let configDigest = hex(SHA256.hash(data: config))
        let legacy = try json(
            LegacyLayer(
                id: layerDigest, created: created, os: "linux", architecture: hostArchitecture,
                config: .init(
                    Env: [path], Entrypoint: [description.entrypoint], Labels: description.labels,
                    WorkingDir: "/")))
        let manifest = try json([
            ManifestEntry(
                Config: "\(configDigest).json", RepoTags: [description.reference.description],
                Layers: ["\(layerDigest)/layer.tar"])
        ])
        let repositories = try json([
            description.reference.name: [description.reference.tag: layerDigest]
        ])

        let archive = try temporaryFile(in: directory.isEmpty ? "." : directory, named: base)
        var renamed = false
        defer {
            close(archive.fd)
            if !renamed { unlink(archive.path) }
        }
        let tar = TarOutput { bytes in
            if case .failure(let error) = writeAll(archive.fd, bytes) {
                throw AppdError.system("write \(archive.path)", errno: error.rawValue)
            }
        }
        func file(_ name: String, _ bytes: [UInt8]) throws {
            try tar.header(name, mode: 0o644, size: Int64(bytes.count), type: Tar.EntryType.regular)
            try tar.append(bytes)
            try tar.append(zeros: Tar.padding(for: Int64(bytes.count)))
        }
        try file("\(configDigest).json", config)
        try tar.header("\(layerDigest)/", mode: 0o755, size: 0, type: Tar.EntryType.directory)
        try file("\(layerDigest)/VERSION", Array("1.0".utf8))
        try file("\(layerDigest)/json", legacy)
        try tar.header(
            "\(layerDigest)/layer.tar", mode: 0o644, size: layerSize, type: Tar.EntryType.regular)
        guard try tar.append(from: layer.fd, count: layerSize, path: "the image layer") else {
            throw AppdError(.io, "the image layer shrank while being copied")
        }
        try tar.append(zeros: Tar.padding(for: layerSize))
        try file("manifest.json", manifest)
        try file("repositories", repositories)
        try tar.append(zeros: 2 * Tar.blockSize)
        try tar.flush()
        guard fsync(archive.fd) == 0 else { throw AppdError.system("fsync \(archive.path)") }
        // mkstemp made it 0600; an image file is for anyone who may read the folder.
        guard fchmod(archive.fd, 0o644) == 0 else {
            throw AppdError.system("chmod \(archive.path)")
        }
        guard rename(archive.path, output) == 0 else {
            throw AppdError.system("rename \(archive.path) to \(output)")
        }
        renamed = true
        return Written(configDigest: configDigest, layerDigest: layerDigest)
    }

    /// The engines' name for this machine's architecture (GOARCH).
    static var hostArchitecture: String {
        #if arch(x86_64)
            "amd64"
        #elseif arch(arm64)
            "arm64"
        #else
            "unknown"
        #endif
    }

    static func temporaryFile(in directory: String, named base: String) throws -> (
        fd: Int32, path: String
    ) {
        var template = Array("\(directory)/.\(base).XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer {
            $0.baseAddress.map { mkstemp($0) } ?? -1
        }
        guard fd >= 0 else {
            throw AppdError.system(
                "create a temporary file in \(directory)",
                hint: errno == EACCES ? "write the image to a folder you may write" : nil)
        }
        // Glibc's module has no mkostemp; F_SETFD on an fd just made cannot fail.
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return (fd, String(decoding: template.prefix { $0 != 0 }.map(UInt8.init), as: UTF8.self))
    }

    static func json(_ value: some Encodable) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(value))
    }

    static func hex(_ digest: SHA256.Digest) -> String {
        digest.map { byte in
            let text = String(byte, radix: 16)
            return byte < 16 ? "0" + text : text
        }.joined()
    }
}

// The JSON shapes of the docker-archive, named as the format spells its keys.
// swift-format-ignore: AlwaysUseLowerCamelCase
struct ContainerConfig: Encodable {
    var Env: [String]
    var Entrypoint: [String]
    var Labels: [String: String]
    var WorkingDir: String
}

// swift-format-ignore: AlwaysUseLowerCamelCase
struct ImageConfig: Encodable {
    struct RootFS: Encodable {
        var type: String
        var diff_ids: [String]
    }
    struct History: Encodable {
        var created: String
        var created_by: String
    }
    var architecture: String
    var os: String
    var created: String
    var config: ContainerConfig
    var rootfs: RootFS
    var history: [History]
}

struct LegacyLayer: Encodable {
    var id: String
    var created: String
    var os: String
    var architecture: String
    var config: ContainerConfig
}

// swift-format-ignore: AlwaysUseLowerCamelCase
struct ManifestEntry: Encodable {
    var Config: String
    var RepoTags: [String]
    var Layers: [String]
}
