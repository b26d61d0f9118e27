import AppdBase
import Foundation
import Testing

@testable import BundleArchive

/// The entries of a tar by name, read with the module's own decoder.
func entries(of bytes: [UInt8]) throws -> [(name: String, header: TarHeader, data: [UInt8])] {
    try headers(of: bytes).filter { $0.header.type != Tar.EntryType.paxEntry }.map {
        offset, header in
        let start = offset + 512
        let data = Array(bytes[start..<(start + Int(header.size))])
        return (String(decoding: header.name, as: UTF8.self), header, data)
    }
}

/// sha256sum's digest of `bytes`: a second implementation, not the writer's own.
func sha256sum(_ bytes: [UInt8], scratch: Scratch) throws -> String {
    let file = scratch.sub("digest-input")
    try Data(bytes).write(to: URL(fileURLWithPath: file))
    let result = try run("/usr/bin/sha256sum", [file])
    unlink(file)
    return String(result.output.prefix(64))
}

@Suite("appd image: the docker-archive")
struct ImageArchiveTests {
    static var description: ImageDescription {
        get throws {
            ImageDescription(
                bundleFolder: "Hello.app", executable: "Hello",
                reference: try ImageReference(parsing: "localhost/appd/hello:1.0"),
                labels: ["org.appd.bundle-id": "com.example.hello", "org.appd.version": "1.0"])
        }
    }

    @Test("manifest, config digest, layer digest and tags read back as docs/oci-image.md says")
    func structure() throws {
        let scratch = Scratch()
        try makeSampleTree(scratch.sub("Hello.app"))
        let output = scratch.sub("hello.tar")
        let written = try ImageArchive.write(
            .docker,
            bundleAt: scratch.sub("Hello.app"), description: try Self.description, to: output)
        let outer = try entries(of: Array(try Data(contentsOf: URL(fileURLWithPath: output))))
        let l = written.layerDigest
        let c = written.configDigest
        #expect(
            outer.map(\.name) == [
                "\(c).json", "\(l)/", "\(l)/VERSION", "\(l)/json", "\(l)/layer.tar",
                "manifest.json",
                "repositories",
            ])
        let byName = Dictionary(uniqueKeysWithValues: outer.map { ($0.name, $0.data) })
        let config = byName["\(c).json"] ?? []
        let layer = byName["\(l)/layer.tar"] ?? []
        #expect(try sha256sum(config, scratch: scratch) == c)
        #expect(try sha256sum(layer, scratch: scratch) == l)

        let raw = String(decoding: byName["manifest.json"] ?? [], as: UTF8.self)
        #expect(
            raw
                == #"[{"Config":"\#(c).json","Layers":["\#(l)/layer.tar"],"RepoTags":["localhost/appd/hello:1.0"]}]"#
        )
        let repositories = String(decoding: byName["repositories"] ?? [], as: UTF8.self)
        #expect(repositories == #"{"localhost/appd/hello":{"1.0":"\#(l)"}}"#)

        let parsed = try JSONSerialization.jsonObject(with: Data(config)) as? [String: Any]
        let inner = parsed?["config"] as? [String: Any]
        #expect(inner?["Entrypoint"] as? [String] == ["/Hello.app/Hello"])
        #expect(inner?["Cmd"] == nil)
        #expect(
            inner?["Labels"] as? [String: String] == [
                "org.appd.bundle-id": "com.example.hello", "org.appd.version": "1.0",
            ])
        let rootfs = parsed?["rootfs"] as? [String: Any]
        #expect(rootfs?["diff_ids"] as? [String] == ["sha256:\(l)"])

        // Every outer entry and every layer entry owned by 0:0 at time 0 (the encoder writes
        // zeros; read the raw fields to be sure).
        for bytes in [Array(try Data(contentsOf: URL(fileURLWithPath: output))), layer] {
            for (offset, _) in try headers(of: bytes) {
                let ownerAndTime =
                    bytes[(offset + 108)..<(offset + 124)] + bytes[(offset + 136)..<(offset + 148)]
                #expect(ownerAndTime.allSatisfy { $0 == UInt8(ascii: "0") || $0 == 0 })
            }
        }
        // The layer: the bundle alone, under Hello.app/, its folder first, modes kept, a
        // symlink stored as a link.
        let inLayer = try entries(of: layer)
        #expect(inLayer.first?.name == "Hello.app/")
        #expect(inLayer.first?.header.type == Tar.EntryType.directory)
        #expect(inLayer.allSatisfy { $0.name.hasPrefix("Hello.app/") })
        #expect(inLayer.count == 15)
        let hello = inLayer.first { $0.name == "Hello.app/Hello" }
        #expect(hello?.header.mode == 0o755)
        #expect(hello?.data == Array("#!/bin/sh\necho hello\n".utf8))
        let link = inLayer.first { $0.name == "Hello.app/link" }
        #expect(link?.header.type == Tar.EntryType.symlink)
        #expect(link?.header.linkName == Array("a/b/c/deep.txt".utf8))
        // GNU tar reads it the same way.
        let listed = try run("/usr/bin/tar", ["--numeric-owner", "-tvf", output])
        #expect(listed.status == 0 && listed.output.contains("0/0"))
        #expect(listing(scratch.path) == ["Hello.app", "hello.tar"])
    }

    @Test("--format oci: index.json names the manifest, each blob is named by its sha256 and size")
    func ociLayout() throws {
        let scratch = Scratch()
        try makeSampleTree(scratch.sub("Hello.app"))
        let output = scratch.sub("hello.tar")
        let written = try ImageArchive.write(
            .oci, bundleAt: scratch.sub("Hello.app"), description: try Self.description,
            to: output)
        let outer = try entries(of: Array(try Data(contentsOf: URL(fileURLWithPath: output))))
        let byName = Dictionary(uniqueKeysWithValues: outer.map { ($0.name, $0.data) })
        #expect(byName["oci-layout"] == Array(#"{"imageLayoutVersion":"1.0.0"}"#.utf8))
        let index =
            try JSONSerialization.jsonObject(with: Data(byName["index.json"] ?? []))
            as? [String: Any]
        let entry = (index?["manifests"] as? [[String: Any]])?.first
        #expect(
            (entry?["annotations"] as? [String: String])?["org.opencontainers.image.ref.name"]
                == "localhost/appd/hello:1.0")
        let manifestDigest = (entry?["digest"] as? String)?.dropFirst("sha256:".count) ?? ""
        let manifest = byName["blobs/sha256/\(manifestDigest)"] ?? []
        #expect(entry?["size"] as? Int == manifest.count)
        // Every blob's name is the sha256 of its bytes.
        for (name, data) in byName where name.hasPrefix("blobs/sha256/") && !name.hasSuffix("/") {
            #expect(try sha256sum(data, scratch: scratch) == name.dropFirst("blobs/sha256/".count))
        }
        let parsed = try JSONSerialization.jsonObject(with: Data(manifest)) as? [String: Any]
        let config = parsed?["config"] as? [String: Any]
        let layers = parsed?["layers"] as? [[String: Any]]
        #expect(config?["digest"] as? String == "sha256:\(written.configDigest)")
        #expect(layers?.count == 1)
        #expect(layers?.first?["digest"] as? String == "sha256:\(written.layerDigest)")
        #expect(
            layers?.first?["size"] as? Int
                == byName["blobs/sha256/\(written.layerDigest)"]?.count)
        #expect(layers?.first?["mediaType"] as? String == "application/vnd.oci.image.layer.v1.tar")
        // The same config bytes as the docker-archive's: the same image ID either way.
        let docker = try ImageArchive.write(
            .docker, bundleAt: scratch.sub("Hello.app"), description: try Self.description,
            to: scratch.sub("docker.tar"))
        #expect(docker.configDigest == written.configDigest)
    }

    @Test("the same bundle gives the same bytes, whatever the file is called")
    func reproducible() throws {
        let scratch = Scratch()
        try makeSampleTree(scratch.sub("Hello.app"))
        let first = try ImageArchive.write(
            .docker,
            bundleAt: scratch.sub("Hello.app"), description: try Self.description,
            to: scratch.sub("one.tar"))
        // Touch every file's times: nothing of them may reach the archive.
        _ = try run("/usr/bin/touch", [scratch.sub("Hello.app/Hello"), scratch.sub("Hello.app")])
        let second = try ImageArchive.write(
            .docker,
            bundleAt: scratch.sub("Hello.app"), description: try Self.description,
            to: scratch.sub("two.tar"))
        #expect(first.configDigest == second.configDigest)
        let one = try Data(contentsOf: URL(fileURLWithPath: scratch.sub("one.tar")))
        let two = try Data(contentsOf: URL(fileURLWithPath: scratch.sub("two.tar")))
        #expect(one.count > 200_000)
        #expect(one == two)
    }

    @Test("an error leaves nothing at the output and no temporary file beside it")
    func atomic() throws {
        let scratch = Scratch()
        try makeSampleTree(scratch.sub("Hello.app"))
        // A FIFO is no bundle's: the writer refuses it mid-walk, after the layer has begun.
        #expect(mkfifo(scratch.sub("Hello.app/zz-pipe"), 0o644) == 0)
        let out = scratch.directory("out")
        #expect(throws: AppdError.self) {
            _ = try ImageArchive.write(
                .docker,
                bundleAt: scratch.sub("Hello.app"), description: try Self.description,
                to: "\(out)/hello.tar")
        }
        #expect(listing(out) == [])
        // An existing file is left as it was.
        try writeFile("\(out)/hello.tar", Array("old".utf8))
        #expect(throws: AppdError.self) {
            _ = try ImageArchive.write(
                .docker,
                bundleAt: scratch.sub("Hello.app"), description: try Self.description,
                to: "\(out)/hello.tar")
        }
        #expect(listing(out) == ["hello.tar"])
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(out)/hello.tar")) == Data("old".utf8))
    }
}

@Suite("appd image: image references")
struct ImageReferenceTests {
    @Test(
        "names the engines accept",
        arguments: [
            ("appd/com.example.hello:1.0", "appd/com.example.hello", "1.0"),
            ("localhost/appd/hello:1", "localhost/appd/hello", "1"),
            (
                "registry.example.com:5000/team/app-x__y:v1_2-3",
                "registry.example.com:5000/team/app-x__y", "v1_2-3"
            ),
            ("hello", "hello", "latest"),
            ("Registry.Example.com/a--b:X", "Registry.Example.com/a--b", "X"),
        ])
    func good(text: String, name: String, tag: String) throws {
        let reference = try ImageReference(parsing: text)
        #expect(reference.name == name && reference.tag == tag)
    }

    @Test(
        "names the engines refuse, each with the part that is wrong",
        arguments: [
            ("Appd/hello:1", "name component 'Appd'"),
            ("appd/hello:", "the tag ''"),
            ("appd/hello:-1", "the tag '-1'"),
            ("appd//hello:1", "name component ''"),
            ("appd/hello.:1", "name component 'hello.'"),
            ("appd/he..llo:1", "name component 'he..llo'"),
            ("appd/hello@sha256:abcd", "a digest"),
            (":1", "the name must be"),
            ("appd/hello:1 2", "the tag '1 2'"),
            ("appd/hel\u{1B}lo:1", "\\u{1b}"),
            ("bad_host.com:x/a:1", "not a registry host"),
        ])
    func bad(text: String, problem: String) {
        do {
            _ = try ImageReference(parsing: text)
            Issue.record("\(text) was accepted")
        } catch let error as AppdError {
            #expect(error.code == .badRequest)
            #expect(error.message.contains(problem), "\(error.message)")
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test(
        "the default is appd/<bundle id in lower case>:<version>; a version no tag can be says --tag"
    )
    func defaults() throws {
        let reference = try ImageReference.defaultReference(
            bundleID: "com.Example.Hello", version: "1.2.3")
        #expect(reference.description == "appd/com.example.hello:1.2.3")
        do {
            _ = try ImageReference.defaultReference(
                bundleID: "com.example.hello", version: "1.0 beta")
            Issue.record("accepted")
        } catch let error as AppdError {
            #expect(error.hint?.contains("--tag") == true)
        }
    }
}
