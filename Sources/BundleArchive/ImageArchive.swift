import AppBundle
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
    /// The image config's `architecture` (GOARCH): that of the bundle's ELF programs, the
    /// host's for a bundle of scripts only.
    public var architecture: String
    /// The config's `created` (RFC 3339, UTC): `appd image` gives SOURCE_DATE_EPOCH or the
    /// newest file of the bundle, so the same bundle still gives the same bytes.
    public var created: String
    /// The config's `User` (`uid:gid`), if any: `appd image` gives AppImageCheck.imageUser.
    public var user: String?

    public init(
        bundleFolder: String, executable: String, reference: ImageReference,
        labels: [String: String], architecture: String = ELFMachine.hostArchitecture,
        created: String = ImageArchive.epoch, user: String? = nil
    ) {
        self.bundleFolder = bundleFolder
        self.executable = executable
        self.reference = reference
        self.labels = labels
        self.architecture = architecture
        self.created = created
        self.user = user
    }

    public var entrypoint: String { "/\(bundleFolder)/\(executable)" }
}

/// Writes a one-layer image archive holding a bundle at `/Name.app`: a docker-archive (the
/// `docker save` layout that `docker load`, `podman load` and `ctr images import` all take; the
/// layout is docs/oci-image.md's, the same scripts/oci/image.py writes, entry for entry) or an
/// OCI image layout in a tar.
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

    /// The creation time of a description that gives none.
    public static let epoch = "1970-01-01T00:00:00Z"
    static let path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

    /// The two archive formats: `docker` (`docker save`'s layout, which docker load, podman load
    /// and ctr images import take) and `oci` (an OCI image layout in a tar, for skopeo's and
    /// podman's `oci-archive:`).
    public enum Format: String, Sendable, CaseIterable {
        case docker, oci
    }

    public static func write(
        _ format: Format, bundleAt bundle: String, description: ImageDescription,
        to output: String, onFile: ((Int64) -> Void)? = nil
    ) throws -> Written {
        let directory = (output as NSString).deletingLastPathComponent
        let folder = directory.isEmpty ? "." : directory
        let base = (output as NSString).lastPathComponent
        // The layer first, to a file with no name: its digest and size head the archive.
        let layer = try temporaryFile(in: folder, named: base)
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
        // The same bytes in both formats (an OCI image config is a docker one's subset).
        let config = try json(
            ImageConfig(
                architecture: description.architecture, os: "linux",
                created: description.created, config: containerConfig(description),
                rootfs: .init(type: "layers", diff_ids: ["sha256:\(layerDigest)"]),
                history: [.init(created: description.created, created_by: "appd image")]))
        let configDigest = hex(SHA256.hash(data: config))
        let parts = Parts(
            config: config, configDigest: configDigest, layerFD: layer.fd,
            layerDigest: layerDigest, layerSize: layerSize)

        let archive = try temporaryFile(in: folder, named: base)
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
        switch format {
        case .docker: try writeDockerEntries(tar, parts, description)
        case .oci: try writeOCIEntries(tar, parts, description)
        }
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

    /// What both formats hold: the config's bytes and the layer (an unnamed file, read from
    /// its start).
    struct Parts {
        var config: [UInt8]
        var configDigest: String
        var layerFD: Int32
        var layerDigest: String
        var layerSize: Int64
    }

    static func containerConfig(_ description: ImageDescription) -> ContainerConfig {
        ContainerConfig(
            Env: [path], Entrypoint: [description.entrypoint], Labels: description.labels,
            User: description.user, WorkingDir: "/")
    }

    /// docs/oci-image.md's table, in its order.
    static func writeDockerEntries(
        _ tar: TarOutput, _ parts: Parts, _ description: ImageDescription
    ) throws {
        let l = parts.layerDigest
        let legacy = try json(
            LegacyLayer(
                id: l, created: description.created, os: "linux",
                architecture: description.architecture,
                config: containerConfig(description)))
        let manifest = try json([
            ManifestEntry(
                Config: "\(parts.configDigest).json",
                RepoTags: [description.reference.description], Layers: ["\(l)/layer.tar"])
        ])
        let repositories = try json([
            description.reference.name: [description.reference.tag: l]
        ])
        try file(tar, "\(parts.configDigest).json", parts.config)
        try tar.header("\(l)/", mode: 0o755, size: 0, type: Tar.EntryType.directory)
        try file(tar, "\(l)/VERSION", Array("1.0".utf8))
        try file(tar, "\(l)/json", legacy)
        try layerFile(tar, "\(l)/layer.tar", parts)
        try file(tar, "manifest.json", manifest)
        try file(tar, "repositories", repositories)
    }

    /// The OCI image layout (image-spec's image-layout.md): `oci-layout`, `index.json` naming
    /// the one manifest with the reference in `org.opencontainers.image.ref.name`, and the
    /// blobs by digest.
    static func writeOCIEntries(
        _ tar: TarOutput, _ parts: Parts, _ description: ImageDescription
    ) throws {
        let manifest = try json(
            OCIManifest(
                schemaVersion: 2, mediaType: OCIMediaType.manifest,
                config: .init(
                    mediaType: OCIMediaType.config, digest: "sha256:\(parts.configDigest)",
                    size: Int64(parts.config.count)),
                layers: [
                    .init(
                        mediaType: OCIMediaType.layer, digest: "sha256:\(parts.layerDigest)",
                        size: parts.layerSize)
                ]))
        let manifestDigest = hex(SHA256.hash(data: manifest))
        let index = try json(
            OCIIndex(
                schemaVersion: 2,
                manifests: [
                    .init(
                        mediaType: OCIMediaType.manifest, digest: "sha256:\(manifestDigest)",
                        size: Int64(manifest.count),
                        annotations: [
                            "org.opencontainers.image.ref.name": description.reference.description
                        ])
                ]))
        try tar.header("blobs/", mode: 0o755, size: 0, type: Tar.EntryType.directory)
        try tar.header("blobs/sha256/", mode: 0o755, size: 0, type: Tar.EntryType.directory)
        try file(tar, "blobs/sha256/\(parts.configDigest)", parts.config)
        try layerFile(tar, "blobs/sha256/\(parts.layerDigest)", parts)
        try file(tar, "blobs/sha256/\(manifestDigest)", manifest)
        try file(tar, "index.json", index)
        try file(tar, "oci-layout", Array(#"{"imageLayoutVersion":"1.0.0"}"#.utf8))
    }

    static func file(_ tar: TarOutput, _ name: String, _ bytes: [UInt8]) throws {
        try tar.header(name, mode: 0o644, size: Int64(bytes.count), type: Tar.EntryType.regular)
        try tar.append(bytes)
        try tar.append(zeros: Tar.padding(for: Int64(bytes.count)))
    }

    static func layerFile(_ tar: TarOutput, _ name: String, _ parts: Parts) throws {
        try tar.header(name, mode: 0o644, size: parts.layerSize, type: Tar.EntryType.regular)
        guard lseek(parts.layerFD, 0, SEEK_SET) == 0,
            try tar.append(from: parts.layerFD, count: parts.layerSize, path: "the image layer")
        else { throw AppdError(.io, "the image layer could not be read back whole") }
        try tar.append(zeros: Tar.padding(for: parts.layerSize))
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
    var User: String?
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

enum OCIMediaType {
    static let manifest = "application/vnd.oci.image.manifest.v1+json"
    static let config = "application/vnd.oci.image.config.v1+json"
    static let layer = "application/vnd.oci.image.layer.v1.tar"
}

struct OCIDescriptor: Encodable {
    var mediaType: String
    var digest: String
    var size: Int64
    var annotations: [String: String]? = nil
}

struct OCIManifest: Encodable {
    var schemaVersion: Int
    var mediaType: String
    var config: OCIDescriptor
    var layers: [OCIDescriptor]
}

struct OCIIndex: Encodable {
    var schemaVersion: Int
    var manifests: [OCIDescriptor]
}
