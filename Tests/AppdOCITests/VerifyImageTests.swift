import Foundation
import Glibc
import TestSupport
import Testing

/// `appd verify IMAGE` (issue 37): the answer appd-oci's `create` gives, before the image is
/// deployed. Each refusal is compared with what a real `appd-oci create` of the same bundle
/// prints, as an engine calls it, on a node with the same appd.conf.
@Suite("appd verify of an image: create's answer, early", .serialized, rootOnly)
struct VerifyImageTests {
    typealias Image = AppImageRunTests.Image

    /// `appd image` of the test bundle: `format` docker or oci.
    static func write(_ image: Image, format: String = "oci") throws -> String {
        let file = "\(image.directory)/image-\(format).tar"
        let result = try ChildProcess(
            "appd",
            [
                "--config", "\(image.directory)/appd.conf", "image", "--format", format, "-o",
                file, image.app,
            ], stdout: .discard, stderr: .capture
        ).finish()
        #expect(result.code == 0, "\(result.stderr)")
        return file
    }

    /// An OCI image layout folder: the oci archive unpacked.
    static func layout(_ image: Image) throws -> String {
        let folder = "\(image.directory)/layout"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let tar = try ChildProcess(
            "/usr/bin/tar", ["-xf", try write(image), "-C", folder], stdout: .discard,
            stderr: .capture
        ).finish()
        #expect(tar.code == 0, "\(tar.stderr)")
        return folder
    }

    /// `appd verify --json IMAGE`: the exit status and the JSON's `reason`.
    static func verify(_ image: Image, _ arguments: [String]) throws -> (
        code: Int32, reason: String?, accepted: Bool?, stdout: String
    ) {
        let result = try ChildProcess(
            "appd", ["--config", "\(image.directory)/appd.conf", "verify", "--json"] + arguments,
            stdout: .capture, stderr: .capture
        ).finish()
        let object =
            (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) as? [String: Any]
        return (
            result.code, object?["reason"] as? String, object?["accepted"] as? Bool,
            result.stdout + result.stderr
        )
    }

    /// What create printed: its one line after `appd-oci: `.
    static func createLine(_ image: Image) throws -> String {
        let result = try image.run()
        #expect(result.code != 0)
        image.expectNothingLeft()
        let line = result.stderr.split(separator: "\n").first { $0.hasPrefix("appd-oci: ") }
        return line.map { String($0.dropFirst("appd-oci: ".count)) } ?? result.stderr
    }

    @Test(
        "an image appd image wrote: accepted from oci-archive:, docker-archive: and oci:DIR, and create runs it"
    )
    func accepted() throws {
        let image = try Image()
        defer { image.remove() }
        let oci = try Self.write(image)
        let docker = try Self.write(image, format: "docker")
        let folder = try Self.layout(image)
        for argument in ["oci-archive:\(oci)", "docker-archive:\(docker)", docker, "oci:\(folder)"]
        {
            let result = try Self.verify(image, [argument])
            #expect(result.code == 0, "\(argument): \(result.stdout)")
            #expect(result.accepted == true, "\(result.stdout)")
        }
        let text = try ChildProcess(
            "appd", ["--config", "\(image.directory)/appd.conf", "verify", "oci-archive:\(oci)"],
            stdout: .capture, stderr: .capture
        ).finish()
        #expect(text.code == 0)
        #expect(text.stdout.contains("create      would be accepted"), "\(text.stdout)")
        #expect(text.stdout.contains("trusted as [Signer test]"), "\(text.stdout)")
        let run = try image.run()
        #expect(run.code == 0, "\(run.stderr)")
    }

    @Test("a signer create does not know: refused with create's line")
    func unknownSigner() throws {
        let image = try Image()
        defer { image.remove() }
        let file = try Self.write(image)
        try "".write(toFile: "\(image.directory)/appd.conf", atomically: true, encoding: .utf8)
        let result = try Self.verify(image, ["oci-archive:\(file)"])
        #expect(result.code == 1, "\(result.stdout)")
        let line = try Self.createLine(image)
        #expect(line.contains("which this host does not trust"), "\(line)")
        #expect(result.reason == line, "verify: \(result.stdout)")
    }

    @Test("a signer that may not grant an entitlement the bundle has: refused with create's line")
    func entitlementNotGranted() throws {
        let image = try Image(
            entitlements: "<key>com.apple.security.network.client</key><true/>")
        defer { image.remove() }
        // The image is written under a policy that grants it; the node's does not.
        let conf = try String(contentsOfFile: "\(image.directory)/appd.conf", encoding: .utf8)
        try (conf + "Entitlements=com.apple.security.network.client\n").write(
            toFile: "\(image.directory)/appd.conf", atomically: true, encoding: .utf8)
        let file = try Self.write(image)
        #expect(try Self.verify(image, ["oci-archive:\(file)"]).code == 0)
        try conf.write(toFile: "\(image.directory)/appd.conf", atomically: true, encoding: .utf8)
        let result = try Self.verify(image, ["oci-archive:\(file)"])
        #expect(result.code == 1, "\(result.stdout)")
        let line = try Self.createLine(image)
        #expect(line.contains("com.apple.security.network.client"), "\(line)")
        #expect(result.reason == line, "verify: \(result.stdout)")
    }

    @Test("UIRequiredDeviceCapabilities naming another CPU: refused with create's line")
    func anotherCPU() throws {
        let image = try Image(
            info: "<key>UIRequiredDeviceCapabilities</key><array><string>arm64</string></array>")
        defer { image.remove() }
        let file = try Self.write(image)
        let result = try Self.verify(image, ["oci-archive:\(file)"])
        #expect(result.code == 1, "\(result.stdout)")
        let line = try Self.createLine(image)
        #expect(line.contains("UIRequiredDeviceCapabilities requires arm64"), "\(line)")
        #expect(result.reason == line, "verify: \(result.stdout)")
    }

    @Test("a layer changed after signing (its digests made to match): refused with create's line")
    func tamperedLayer() throws {
        let image = try Image()
        defer { image.remove() }
        let folder = try Self.layout(image)
        try Self.tamperLayer(folder)
        let result = try Self.verify(image, ["oci:\(folder)"])
        #expect(result.code == 1, "\(result.stdout)")
        // The same change to the bundle create is given.
        let path = "\(image.app)/echo"
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(Self.replace(Array("BusyBox v".utf8), with: Array("BusyBoy v".utf8), in: &bytes))
        unlink(path)
        try image.place(bytes, at: path, mode: 0o755)
        let line = try Self.createLine(image)
        #expect(line.contains("does not match its code signature"), "\(line)")
        #expect(result.reason == line, "verify: \(result.stdout)")
    }

    @Test("attack: a layer that does not match its digest, or a digest naming a path, is refused")
    func badDigests() throws {
        let image = try Image()
        defer { image.remove() }
        let folder = try Self.layout(image)
        let manifest = try Self.manifestPath(folder)
        let layer = try #require(try Self.layerPath(folder))
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: layer)))
        #expect(Self.replace(Array("BusyBox v".utf8), with: Array("BusyBoy v".utf8), in: &bytes))
        try Data(bytes).write(to: URL(fileURLWithPath: layer))
        let changed = try Self.verify(image, ["oci:\(folder)"])
        #expect(changed.code == 1)
        #expect(changed.reason?.contains("does not match its digest") == true, "\(changed.stdout)")
        // index.json naming a manifest by a path rather than a digest.
        let index = "\(folder)/index.json"
        let original = try String(contentsOfFile: index, encoding: .utf8)
        let hex = (manifest as NSString).lastPathComponent
        try original.replacingOccurrences(of: "sha256:\(hex)", with: "sha256:../../../etc/passwd")
            .write(toFile: index, atomically: true, encoding: .utf8)
        let escaped = try Self.verify(image, ["oci:\(folder)"])
        #expect(escaped.code == 1)
        #expect(
            escaped.reason?.contains("is not sha256:<64 hex digits>") == true, "\(escaped.stdout)")
        // An image that is not there: not a refusal (exit 2), an admission check may retry.
        #expect(try Self.verify(image, ["oci-archive:\(image.directory)/missing.tar"]).code == 2)
    }

    @Test(
        "docker://: an image pushed to a private registry on 127.0.0.1 is fetched with skopeo and answered as create would; a tag the registry lacks is exit 2"
    )
    func registry() throws {
        let tools = ["/usr/bin/skopeo", "/usr/bin/docker-registry"]
        let missing = tools.filter { !FileManager.default.isExecutableFile(atPath: $0) }
        guard missing.isEmpty else {
            // Not a pass: say what is missing (scripts/oci-deps installs them).
            if rootTestsRequired { Issue.record("missing \(missing); run scripts/oci-deps") }
            return
        }
        let image = try Image()
        defer { image.remove() }
        let file = try Self.write(image)
        // A private registry on a port the kernel picks (it prints no port: pick one free now).
        let port = try freeLocalPort()
        let config = "\(image.directory)/registry.yml"
        try """
        version: 0.1
        storage:
          filesystem:
            rootdirectory: \(image.directory)/registry
        http:
          addr: 127.0.0.1:\(port)
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let registry = try ChildProcess(
            "/usr/bin/docker-registry", ["serve", config], stdout: .discard, stderr: .discard)
        defer {
            registry.signal(SIGTERM)
            registry.waitUntilExit()
        }
        let reference = "127.0.0.1:\(port)/appd-test/echo:1"
        var pushed: (code: Int32, stdout: String, stderr: String) = (1, "", "")
        // The registry takes a moment to listen.
        for _ in 0..<50 {
            pushed = try ChildProcess(
                "/usr/bin/skopeo",
                [
                    "copy", "--dest-tls-verify=false", "oci-archive:\(file)",
                    "docker://\(reference)",
                ],
                stdout: .capture, stderr: .capture
            ).finish()
            if pushed.code == 0 { break }
            usleep(100_000)
        }
        #expect(pushed.code == 0, "\(pushed.stderr)")
        let accepted = try Self.verify(image, ["--tls-verify=false", "docker://\(reference)"])
        #expect(accepted.code == 0 && accepted.accepted == true, "\(accepted.stdout)")
        try "".write(toFile: "\(image.directory)/appd.conf", atomically: true, encoding: .utf8)
        let refused = try Self.verify(image, ["--tls-verify=false", "docker://\(reference)"])
        #expect(refused.code == 1, "\(refused.stdout)")
        #expect(refused.reason == (try Self.createLine(image)), "\(refused.stdout)")
        let absent = try Self.verify(
            image, ["--tls-verify=false", "docker://127.0.0.1:\(port)/appd-test/none:1"])
        #expect(absent.code == 2, "\(absent.stdout)")
        #expect(absent.reason?.contains("skopeo could not copy") == true, "\(absent.stdout)")
    }

    @Test("--signers DIR: a fleet's drop-ins decide, not the signers.d beside appd.conf")
    func signersFolder() throws {
        let image = try Image()
        defer { image.remove() }
        let file = try Self.write(image)
        let signers = "\(image.directory)/fleet-signers"
        try FileManager.default.createDirectory(atPath: signers, withIntermediateDirectories: true)
        try FileManager.default.moveItem(
            atPath: "\(image.directory)/appd.conf", toPath: "\(signers)/test.conf")
        try "".write(toFile: "\(image.directory)/appd.conf", atomically: true, encoding: .utf8)
        #expect(try Self.verify(image, ["oci-archive:\(file)"]).code == 1)
        let result = try Self.verify(image, ["--signers", signers, "oci-archive:\(file)"])
        #expect(result.code == 0, "\(result.stdout)")
    }

    // MARK: - Layout surgery

    static func replace(_ old: [UInt8], with new: [UInt8], in bytes: inout [UInt8]) -> Bool {
        guard old.count == new.count, bytes.count >= old.count else { return false }
        for start in 0...(bytes.count - old.count) where bytes[start] == old[0] {
            if Array(bytes[start..<start + old.count]) == old {
                bytes.replaceSubrange(start..<start + old.count, with: new)
                return true
            }
        }
        return false
    }

    static func sha256(_ path: String) throws -> String {
        let result = try ChildProcess(
            "/usr/bin/sha256sum", [path], stdout: .capture, stderr: .capture
        ).finish()
        return String(result.stdout.prefix(64))
    }

    static func json(_ path: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path)))
            as? [String: Any] ?? [:]
    }

    static func manifestPath(_ folder: String) throws -> String {
        let index = try json("\(folder)/index.json")
        let digest = ((index["manifests"] as? [[String: Any]])?.first?["digest"] as? String) ?? ""
        return "\(folder)/blobs/sha256/\(digest.dropFirst(7))"
    }

    static func layerPath(_ folder: String) throws -> String? {
        let manifest = try json(try manifestPath(folder))
        let digest = (manifest["layers"] as? [[String: Any]])?.first?["digest"] as? String
        return digest.map { "\(folder)/blobs/sha256/\($0.dropFirst(7))" }
    }

    /// Changes a byte string in the busybox of the layer, then every digest above it, as
    /// someone who rebuilt the image from a changed bundle would: the image is sound, the
    /// bundle no longer matches its signature.
    static func tamperLayer(_ folder: String) throws {
        let manifestFile = try manifestPath(folder)
        var manifest = try json(manifestFile)
        let layerFile = try #require(try layerPath(folder))
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: layerFile)))
        #expect(replace(Array("BusyBox v".utf8), with: Array("BusyBoy v".utf8), in: &bytes))
        unlink(layerFile)
        let newLayer = "\(folder)/blobs/sha256/new-layer"
        try Data(bytes).write(to: URL(fileURLWithPath: newLayer))
        let layerDigest = try sha256(newLayer)
        rename(newLayer, "\(folder)/blobs/sha256/\(layerDigest)")
        var layers = manifest["layers"] as? [[String: Any]] ?? []
        layers[0]["digest"] = "sha256:\(layerDigest)"
        manifest["layers"] = layers
        // The config's diff_ids.
        var configDescriptor = manifest["config"] as? [String: Any] ?? [:]
        let configFile =
            "\(folder)/blobs/sha256/\(((configDescriptor["digest"] as? String) ?? "").dropFirst(7))"
        var config = try json(configFile)
        config["rootfs"] = ["type": "layers", "diff_ids": ["sha256:\(layerDigest)"]]
        let configDigest = try write(config, in: folder)
        configDescriptor["digest"] = "sha256:\(configDigest)"
        configDescriptor["size"] = try attributesSize("\(folder)/blobs/sha256/\(configDigest)")
        manifest["config"] = configDescriptor
        let manifestDigest = try write(manifest, in: folder)
        var index = try json("\(folder)/index.json")
        var manifests = index["manifests"] as? [[String: Any]] ?? []
        manifests[0]["digest"] = "sha256:\(manifestDigest)"
        manifests[0]["size"] = try attributesSize("\(folder)/blobs/sha256/\(manifestDigest)")
        index["manifests"] = manifests
        try JSONSerialization.data(withJSONObject: index).write(
            to: URL(fileURLWithPath: "\(folder)/index.json"))
        unlink(manifestFile)
        unlink(configFile)
    }

    /// A JSON blob written under its digest; returns the digest.
    static func write(_ object: [String: Any], in folder: String) throws -> String {
        let file = "\(folder)/blobs/sha256/new-blob"
        try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]).write(
            to: URL(fileURLWithPath: file))
        let digest = try sha256(file)
        rename(file, "\(folder)/blobs/sha256/\(digest)")
        return digest
    }

    static func attributesSize(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
    }
}
