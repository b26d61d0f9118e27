import AppBundle
import AppdBase
import Crypto
import Foundation
import Glibc

/// Reads a container image as an engine would before it hands appd-oci a root filesystem, for
/// `appd verify` of an image (issue 37): an OCI image layout (a folder, `oci:DIR[:TAG]`), the
/// same in a tar (`oci-archive:FILE[:TAG]`) or a docker-archive (`docker-archive:FILE`, what
/// `appd image` writes by default). Every blob is checked against its digest and every layer
/// against the config's `diff_ids`, as the engines check them, then the layer is extracted by
/// the bundle extractor (nothing outside the folder, the bundle limits), so what is verified
/// is the tree create would see.
///
/// The image is hostile: each JSON file is read whole only up to `maxJSONBytes`, a digest must
/// be `sha256:` and 64 hex digits before it names a file, a docker-archive's paths must stay
/// inside it. Images of one layer are read (what `appd image` writes); more are refused, since
/// applying layers (whiteouts, replaced folders) is the engine's work.
public enum ImageReader {
    static let maxJSONBytes = 4 << 20

    /// What the image says besides its files.
    public struct Image: Sendable, Encodable {
        /// The tag it was read by, if any.
        public var reference: String?
        /// `sha256:...` of the config: the image ID the engines print.
        public var imageID: String
        public var architecture: String?
        public var entrypoint: [String]
        public var cmd: [String]
        public var user: String?
        public var created: String?
        public var layerDigest: String

        /// What an engine makes process.args of.
        public var arguments: [String] { entrypoint + cmd }
    }

    /// Where an image is, as skopeo and podman spell it.
    public enum Source: Equatable, Sendable {
        case layout(String, tag: String?)
        case ociArchive(String, tag: String?)
        case dockerArchive(String)
        case registry(String)

        /// `oci:DIR[:TAG]`, `oci-archive:FILE[:TAG]`, `docker-archive:FILE`, `docker://REF`; a
        /// bare path is a layout if it is a folder, else an archive told apart by its entries.
        public init(parsing text: String) {
            func split(_ rest: Substring) -> (String, String?) {
                // A tag follows the last ':' unless a '/' comes after it.
                if let colon = rest.lastIndex(of: ":"), !rest[colon...].contains("/") {
                    return (String(rest[..<colon]), String(rest[rest.index(after: colon)...]))
                }
                return (String(rest), nil)
            }
            if text.hasPrefix("docker://") {
                self = .registry(String(text.dropFirst("docker://".count)))
            } else if text.hasPrefix("oci-archive:") {
                let (path, tag) = split(text.dropFirst("oci-archive:".count))
                self = .ociArchive(path, tag: tag)
            } else if text.hasPrefix("docker-archive:") {
                self = .dockerArchive(String(text.dropFirst("docker-archive:".count)))
            } else if text.hasPrefix("oci:") {
                let (path, tag) = split(text.dropFirst("oci:".count))
                self = .layout(path, tag: tag)
            } else {
                var info = stat()
                self =
                    stat(text, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
                    ? .layout(text, tag: nil) : .ociArchive(text, tag: nil)
            }
        }
    }

    /// Reads `source` and extracts its layer into `rootfs` (an empty folder); `scratch` (an
    /// empty folder) holds an archive's or a registry's blobs meanwhile.
    public static func unpack(
        _ source: Source, scratch: String, into rootfs: String, limits: BundleLimits,
        tlsVerify: Bool = true
    ) throws -> Image {
        switch source {
        case .layout(let path, let tag):
            return try unpackLayout(path, tag: tag, into: rootfs, limits: limits)
        case .registry(let reference):
            try copyFromRegistry(reference, to: "\(scratch)/layout", tlsVerify: tlsVerify)
            var image = try unpackLayout(
                "\(scratch)/layout", tag: "verify", into: rootfs, limits: limits)
            image.reference = reference
            return image
        case .ociArchive(let file, nil), .dockerArchive(let file):
            try extract(archive: file, into: scratch, limits: limits)
            if FileManager.default.fileExists(atPath: "\(scratch)/manifest.json") {
                return try unpackDocker(scratch, into: rootfs, limits: limits, shown: file)
            }
            guard FileManager.default.fileExists(atPath: "\(scratch)/index.json") else {
                throw AppdError(
                    .invalidBundle,
                    "\(file) is neither an OCI image layout (index.json) nor a docker-archive (manifest.json)"
                )
            }
            return try unpackLayout(scratch, tag: nil, into: rootfs, limits: limits, shown: file)
        case .ociArchive(let file, let tag?):
            try extract(archive: file, into: scratch, limits: limits)
            return try unpackLayout(scratch, tag: tag, into: rootfs, limits: limits, shown: file)
        }
    }

    // MARK: - OCI image layout

    static func unpackLayout(
        _ layout: String, tag: String?, into rootfs: String, limits: BundleLimits,
        shown: String? = nil
    ) throws -> Image {
        let shown = shown ?? layout
        let index = try object(at: "\(layout)/index.json", shown: "\(shown): index.json")
        let manifests = (index["manifests"] as? [[String: Any]]) ?? []
        let named = manifests.filter { descriptor in
            guard let tag else { return true }
            let annotations = descriptor["annotations"] as? [String: Any]
            let name = annotations?["org.opencontainers.image.ref.name"] as? String
            // skopeo and podman store `NAME:TAG` or just `TAG`.
            return name == tag || name?.hasSuffix(":\(tag)") == true
        }
        guard named.count == 1, let descriptor = named.first else {
            throw AppdError(
                .invalidBundle,
                named.isEmpty
                    ? "\(shown) has no image\(tag.map { " tagged \($0)" } ?? "")"
                    : "\(shown) holds \(named.count) images; name one with :TAG")
        }
        let manifest = try blob(layout, descriptor, shown: shown, what: "the manifest")
        guard let config = manifest["config"] as? [String: Any],
            let layers = manifest["layers"] as? [[String: Any]]
        else { throw AppdError(.invalidBundle, "\(shown): the manifest has no config or layers") }
        let (configDigest, configObject) = try configBlob(layout, config, shown: shown)
        guard layers.count == 1, let layer = layers.first else {
            throw oneLayer(shown, layers.count)
        }
        let digest = try digestName(layer["digest"], shown: shown)
        let path = "\(layout)/blobs/sha256/\(digest)"
        let diffID = try extractLayer(
            path, into: rootfs, limits: limits, shown: "\(shown): layer sha256:\(digest)",
            blobDigest: digest)
        try checkDiffID(diffID, configObject, shown: shown)
        let name =
            (descriptor["annotations"] as? [String: Any])?["org.opencontainers.image.ref.name"]
            as? String
        return image(configObject, id: configDigest, reference: name, layer: digest)
    }

    // MARK: - docker-archive

    static func unpackDocker(
        _ folder: String, into rootfs: String, limits: BundleLimits, shown: String
    ) throws -> Image {
        let data = try read("\(folder)/manifest.json", shown: "\(shown): manifest.json")
        guard let entries = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]],
            entries.count == 1, let entry = entries.first,
            let configPath = entry["Config"] as? String,
            let layers = entry["Layers"] as? [String]
        else {
            throw AppdError(
                .invalidBundle, "\(shown): manifest.json does not name exactly one image")
        }
        guard layers.count == 1, let layer = layers.first else {
            throw oneLayer(shown, layers.count)
        }
        let configFile = try inside(folder, configPath, shown: shown)
        let configData = try read(configFile, shown: "\(shown): \(configPath)")
        let configDigest = hex(SHA256.hash(data: configData))
        // `docker save` names the config by its digest: a name that says otherwise is a lie.
        let stem = (configPath as NSString).lastPathComponent.replacingOccurrences(
            of: ".json", with: "")
        if isHexDigest(stem), stem != configDigest {
            throw AppdError(
                .invalidBundle,
                "\(shown): \(configPath) does not match its digest (sha256:\(configDigest))")
        }
        guard
            let configObject = try? JSONSerialization.jsonObject(with: configData) as? [String: Any]
        else { throw AppdError(.invalidBundle, "\(shown): \(configPath) is not a JSON object") }
        let diffID = try extractLayer(
            try inside(folder, layer, shown: shown), into: rootfs, limits: limits,
            shown: "\(shown): \(layer)", blobDigest: nil)
        try checkDiffID(diffID, configObject, shown: shown)
        let tags = entry["RepoTags"] as? [String]
        return image(configObject, id: configDigest, reference: tags?.first, layer: diffID)
    }

    // MARK: - Registry

    /// `skopeo copy docker://REF oci:DIR:verify`: the registry's image as a layout.
    static func copyFromRegistry(_ reference: String, to layout: String, tlsVerify: Bool) throws {
        let candidates: [String] = ["/usr/bin/skopeo", "/usr/local/bin/skopeo"]
        guard let skopeo = candidates.first(where: { access($0, X_OK) == 0 }) else {
            throw AppdError(
                .unsupported, "reading docker://\(reference) needs skopeo, which is not installed",
                hint: "install skopeo, or give an oci-archive:FILE that skopeo copy wrote")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: skopeo)
        process.arguments = [
            "copy", "--quiet", "--src-tls-verify=\(tlsVerify)", "docker://\(reference)",
            "oci:\(layout):verify",
        ]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        do { try process.run() } catch {
            throw AppdError(.io, "cannot run \(skopeo): \(error)")
        }
        let said = errors.fileHandleForReading.readDataToEndOfFile().prefix(4096)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let text =
                String(decoding: said, as: UTF8.self)
                .split(separator: "\n").last.map(String.init) ?? ""
            throw AppdError(
                .io, "skopeo could not copy docker://\(reference): \(Tar.shown(text.utf8))")
        }
    }

    // MARK: - Parts

    static func oneLayer(_ shown: String, _ count: Int) -> AppdError {
        AppdError(
            .invalidBundle,
            "\(shown) has \(count) layers; verify reads images of one layer, as appd image writes them",
            hint: "build the image with appd image Name.app")
    }

    static func image(
        _ config: [String: Any], id: String, reference: String?, layer: String
    ) -> Image {
        let container = config["config"] as? [String: Any] ?? [:]
        return Image(
            reference: reference, imageID: "sha256:\(id)",
            architecture: config["architecture"] as? String,
            entrypoint: container["Entrypoint"] as? [String] ?? [],
            cmd: container["Cmd"] as? [String] ?? [],
            user: (container["User"] as? String).flatMap { $0.isEmpty ? nil : $0 },
            created: config["created"] as? String, layerDigest: "sha256:\(layer)")
    }

    static func configBlob(_ layout: String, _ descriptor: [String: Any], shown: String) throws
        -> (String, [String: Any])
    {
        let digest = try digestName(descriptor["digest"], shown: shown)
        return (digest, try blob(layout, descriptor, shown: shown, what: "the config"))
    }

    /// A JSON blob of the layout, checked against its descriptor's digest.
    static func blob(
        _ layout: String, _ descriptor: [String: Any], shown: String, what: String
    ) throws -> [String: Any] {
        let digest = try digestName(descriptor["digest"], shown: shown)
        let data = try read("\(layout)/blobs/sha256/\(digest)", shown: "\(shown): \(what)")
        guard hex(SHA256.hash(data: data)) == digest else {
            throw AppdError(
                .invalidBundle, "\(shown): \(what) does not match its digest sha256:\(digest)")
        }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw AppdError(.invalidBundle, "\(shown): \(what) is not a JSON object")
        }
        return object
    }

    static func object(at path: String, shown: String) throws -> [String: Any] {
        guard
            let object = try? JSONSerialization.jsonObject(with: read(path, shown: shown))
                as? [String: Any]
        else { throw AppdError(.invalidBundle, "\(shown) is not a JSON object") }
        return object
    }

    /// `sha256:<64 hex>` → the hex, which may then name a file.
    static func digestName(_ value: Any?, shown: String) throws -> String {
        guard let text = value as? String, text.hasPrefix("sha256:"),
            isHexDigest(String(text.dropFirst(7)))
        else {
            throw AppdError(
                .invalidBundle,
                "\(shown): a digest is not sha256:<64 hex digits> (\(Tar.shown(String(describing: value ?? "none").prefix(80).utf8)))"
            )
        }
        return String(text.dropFirst(7))
    }

    static func isHexDigest(_ text: String) -> Bool {
        text.utf8.count == 64
            && text.utf8.allSatisfy {
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
                    || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0)
            }
    }

    /// `name` of a docker-archive, which must stay inside `folder`.
    static func inside(_ folder: String, _ name: String, shown: String) throws -> String {
        let parts = name.split(separator: "/")
        guard !name.hasPrefix("/"), !parts.isEmpty, !parts.contains(".."), name.utf8.count <= 1024
        else {
            throw AppdError(
                .invalidBundle,
                "\(shown): '\(Tar.shown(name.utf8))' is not a path inside the archive")
        }
        return "\(folder)/\(name)"
    }

    static func checkDiffID(_ diffID: String, _ config: [String: Any], shown: String) throws {
        let rootfs = config["rootfs"] as? [String: Any]
        guard let ids = rootfs?["diff_ids"] as? [String], ids == ["sha256:\(diffID)"] else {
            throw AppdError(
                .invalidBundle,
                "\(shown): the layer (sha256:\(diffID) uncompressed) is not the config's rootfs.diff_ids"
            )
        }
    }

    /// A bounded JSON file, not followed through a link.
    static func read(_ path: String, shown: String) throws -> Data {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw AppdError.system("open \(shown)") }
        defer { close(fd) }
        switch readAll(fd, limit: maxJSONBytes + 1) {
        case .success(let bytes) where bytes.count <= maxJSONBytes: return Data(bytes)
        case .success:
            throw AppdError(.invalidBundle, "\(shown) is larger than \(maxJSONBytes) bytes")
        case .failure(let error): throw AppdError.system("read \(shown)", errno: error.rawValue)
        }
    }

    /// An archive (oci-archive, docker-archive) into `folder`, by the bundle extractor.
    static func extract(archive file: String, into folder: String, limits: BundleLimits) throws {
        var extractor = try BundleArchiveExtractor(into: folder, limits: limits)
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw AppdError.system("open \(file)") }
        defer { close(fd) }
        try stream(fd, shown: file) { try extractor.consume($0) }
        try extractor.finish()
    }

    /// Extracts a layer (a tar, gzip'd or not) into `rootfs`; returns the sha256 of the tar
    /// (its diff_id). `blobDigest`: what the compressed blob must hash to.
    static func extractLayer(
        _ path: String, into rootfs: String, limits: BundleLimits, shown: String,
        blobDigest: String?
    ) throws -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw AppdError.system("open \(shown)") }
        defer { close(fd) }
        if let blobDigest {
            var hash = SHA256()
            try stream(fd, shown: shown) { hash.update(bufferPointer: $0) }
            guard hex(hash.finalize()) == blobDigest else {
                throw AppdError(.invalidBundle, "\(shown) does not match its digest")
            }
            guard lseek(fd, 0, SEEK_SET) == 0 else { throw AppdError.system("seek \(shown)") }
        }
        guard case .success(let head) = readAll(fd, limit: 2) else {
            throw AppdError.system("read \(shown)")
        }
        var extractor = try BundleArchiveExtractor(into: rootfs, limits: limits)
        var tarHash = SHA256()
        if head == GzipReader.magic {
            let reader = try GzipReader(fd: fd, head: head, shown: shown)
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            while true {
                let count = try buffer.withUnsafeMutableBytes { try reader.read(into: $0) }
                if count == 0 { break }
                try buffer.withUnsafeBytes { raw in
                    let part = UnsafeRawBufferPointer(rebasing: raw.prefix(count))
                    tarHash.update(bufferPointer: part)
                    try extractor.consume(part)
                }
            }
        } else {
            try head.withUnsafeBytes { raw in
                tarHash.update(bufferPointer: raw)
                try extractor.consume(raw)
            }
            try stream(fd, shown: shown) { raw in
                tarHash.update(bufferPointer: raw)
                try extractor.consume(raw)
            }
        }
        try extractor.finish()
        return hex(tarHash.finalize())
    }

    /// Every byte of `fd` from where it is, 64 KiB at a time.
    static func stream(
        _ fd: Int32, shown: String, _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let result = buffer.withUnsafeMutableBytes { raw in
                valueOrErrno { Glibc.read(fd, raw.baseAddress, raw.count) }
            }
            let count: Int
            switch result {
            case .success(let read): count = read
            case .failure(let error): throw AppdError.system("read \(shown)", errno: error.rawValue)
            }
            if count == 0 { return }
            try buffer.withUnsafeBytes {
                try body(UnsafeRawBufferPointer(rebasing: $0.prefix(count)))
            }
        }
    }

    static func hex(_ digest: SHA256.Digest) -> String { ImageArchive.hex(digest) }
}
